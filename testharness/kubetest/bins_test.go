package kubetest_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/need"
)

// Every Kubernetes command make kube-bins builds is found by Binary and is
// the release the harness names (its --version is KubeVersion's, as the
// build's ldflags set it): kube-proxy and kube-controller-manager too.
func TestKubeBinariesAreTheRelease(t *testing.T) {
	for _, name := range []string{"kube-apiserver", "kubelet", "kube-scheduler", "kube-proxy", "kube-controller-manager"} {
		t.Run(name, func(t *testing.T) {
			bin, err := kubetest.Binary(name)
			need.Err(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", bin, err, out)
			}
			if got, want := strings.TrimSpace(string(out)), "Kubernetes "+kubetest.KubeVersion; got != want {
				t.Fatalf("%s --version says %q, want %q", bin, got, want)
			}
		})
	}
}
