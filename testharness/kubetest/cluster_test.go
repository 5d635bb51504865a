package kubetest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// A started cluster serves agent-sandbox's kinds to the kubeconfig's
// admin, validates against the real CRDs, and is gone after Close.
func TestStart(t *testing.T) {
	kubetest.NeedAPIServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	c, err := kubetest.Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"sandboxtemplates", "sandboxwarmpools", "sandboxclaims"} {
		gvr := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: res}
		if _, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list %s: %v", res, err)
		}
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace("default").
		Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("default ServiceAccount: %v", err)
	}
	// The CRD's schema is enforced: a warm pool needs a template reference.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "bad"},
		"spec":     map[string]any{"replicas": "three"},
	}}
	gvr := schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	_, err = dyn.Resource(gvr).Namespace("default").Create(ctx, bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.replicas") {
		t.Fatalf("an invalid warm pool was not refused by the CRD's validation: %v", err)
	}

	pids := pidsOf(t, dir)
	if len(pids) != 2 {
		t.Fatalf("want etcd and kube-apiserver running from %s, found pids %v", dir, pids)
	}
	c.Close()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after Close", pid)
		}
	}
}

// pidsOf lists the processes whose command line names dir.
func pidsOf(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}
