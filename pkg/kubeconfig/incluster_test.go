package kubeconfig

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// Outside a pod, in-cluster config says what to give instead.
func TestInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if InPod() {
		t.Fatal("InPod with $KUBERNETES_SERVICE_HOST unset")
	}
	if _, _, err := InCluster(); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("want an error naming the variable and the way out, got %v", err)
	}
}

// In what looks like a pod without its service account's files, the error
// names what is missing rather than failing later on the first request.
func TestInClusterWithoutServiceAccount(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	_, _, err := InCluster()
	if err == nil {
		need.Missing(t, "a host outside a pod: this one has a service account token")
	}
	if !strings.Contains(err.Error(), "in-cluster config") || !strings.Contains(err.Error(), "token") {
		t.Fatalf("want an error naming the token, got %v", err)
	}
}
