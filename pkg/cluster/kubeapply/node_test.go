//go:build linux

package kubeapply_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// On a real node, with the scheduler and agent-sandbox's controller, the
// render's warm pool (its pods: the runner installed by the init container
// from the runner image, a workspace that blocks) becomes ready, and Wait
// returns once status.readyReplicas reaches spec.replicas.
func TestWaitReadyOnNode(t *testing.T) {
	kubetest.SkipUnlessNode(t, "kube-scheduler", "agent-sandbox-controller")
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	w := runtimetest.New(t, host)
	// The workspace container's command is the template image's own:
	// here one that blocks.
	sleeper := w.TemplateWithEntrypoint(t, "/bin/sleep", "86400")
	controlPlane := w.ControlPlane(t)

	c := kubetest.New(t)
	n, err := c.StartNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StartSandboxController(ctx); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	// The generation pins runtime class runc: containerd's runtime of that
	// name.
	runtimeClasses := schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}
	opsApply(t, dyn, runtimeClasses, map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc",
	})
	if err := c.PrepareNamespace(ctx, "warm-ns"); err != nil {
		t.Fatal(err)
	}
	cr := newConfigRepoPins(t, "warm", "warm-ns", 1, func(int) map[generation.Kind]generation.Pin {
		return map[generation.Kind]generation.Pin{
			generation.ControlPlane:      {Image: controlPlane},
			generation.Runner:            {Image: w.Runner},
			generation.WorkspaceTemplate: {Image: sleeper},
			generation.RuntimeClass:      {ID: "runc"},
		}
	})
	a := newApplier(t, c)
	start := time.Now()
	cs := apply(t, a, cr.desire([]string{pool.Active}, []int{2}))
	if len(cs.WarmPools) != 1 {
		t.Fatalf("want one warm pool applied, got %v", cs.WarmPools)
	}
	pods := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("warm-ns")
	st, err := a.Wait(ctx, cs.WarmPools, 2*time.Minute)
	if err != nil {
		list, lerr := pods.List(ctx, metav1.ListOptions{})
		if lerr == nil {
			for _, p := range list.Items {
				t.Logf("pod %s: %v", p.GetName(), p.Object["status"])
			}
		}
		t.Fatalf("%v; kubelet log:\n%s", err, c.Log("kubelet"))
	}
	t.Logf("apply to a warm pool of 2 ready: %s", time.Since(start).Round(10*time.Millisecond))
	if len(st) != 1 || st[0].Ready != 2 || st[0].Replicas != 2 || st[0].Missing {
		t.Fatalf("Wait returned %v, want one pool 2/2 ready", st)
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: kubeobjects.LabelPool + "=warm"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range list.Items {
		phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		if phase == "Running" && node == n.Name() {
			running++
		}
	}
	if running != 2 {
		t.Fatalf("%d of %d pods of the pool run on node %s, want 2", running, len(list.Items), n.Name())
	}
}
