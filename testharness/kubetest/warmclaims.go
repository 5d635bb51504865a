package kubetest

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// agent-sandbox's resources, for the bare side of a warm-claim benchmark.
var (
	warmPoolsGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	claimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	sandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	podsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// WaitWarmPool waits (at most 3 minutes) until agent-sandbox's
// SandboxWarmPool ns/name has size ready members.
func WaitWarmPool(tb testing.TB, dyn dynamic.Interface, ns, name string, size int) {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		wp, err := dyn.Resource(warmPoolsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			if ready, _, _ := unstructured.NestedInt64(wp.Object, "status", "readyReplicas"); int(ready) >= size {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("warm pool %s/%s not %d ready after 3m: %v", ns, name, size, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BareClaim creates SandboxClaim ns/name on warm pool pool and watches it
// until it is Ready, as a client of agent-sandbox would without Slipway:
// the peer of a warm claim through Slipway.
func BareClaim(tb testing.TB, dyn dynamic.Interface, ns, pool, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claims := dyn.Resource(claimsGVR).Namespace(ns)
	c, err := claims.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": claimsGVR.Group + "/" + claimsGVR.Version, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": pool}},
	}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: c.GetResourceVersion()})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Modified && ev.Type != watch.Added {
			continue
		}
		u := ev.Object.(*unstructured.Unstructured)
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return
			}
		}
	}
	tb.Fatalf("bare claim %s not Ready: %v", name, ctx.Err())
}

// DeleteBareClaim deletes a bare claim and the Sandbox and pod it got (a
// test cluster may run no garbage collector) and waits until they are
// gone.
func DeleteBareClaim(tb testing.TB, dyn dynamic.Interface, ns, name string) {
	tb.Helper()
	ctx := context.Background()
	c, err := dyn.Resource(claimsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	sb, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name")
	for _, r := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{claimsGVR, name}, {sandboxesGVR, sb}, {podsGVR, sb}} {
		if r.name == "" {
			continue
		}
		if err := dyn.Resource(r.gvr).Namespace(ns).Delete(ctx, r.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			tb.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; {
			if _, err := dyn.Resource(r.gvr).Namespace(ns).Get(ctx, r.name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("%s %s/%s not gone after 1m", r.gvr.Resource, ns, r.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
