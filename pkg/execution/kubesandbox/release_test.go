//go:build linux

package kubesandbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

var (
	relClaimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	relSandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
)

// boundClaim makes owner's claim bound to a Sandbox sb it controls, as
// agent-sandbox's controller leaves them, and returns both as stored.
func boundClaim(t *testing.T, dyn dynamic.Interface, ns, owner, sb string, proof bool, sbFinalizers []any) (claim, sandbox *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	const gen = "g-4444444444444444444444444444444444444444444444444444444444444444"
	labels := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	if proof {
		labels[kubesandbox.LabelProof] = "true"
	}
	c, err := dyn.Resource(relClaimsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": kubesandbox.ClaimName(owner), "labels": labels,
			"annotations": map[string]any{kubesandbox.AnnotationOwner: owner, kubeobjects.AnnotationGenerationID: gen}},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName("agents", gen)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"name": sb, "ownerReferences": []any{map[string]any{"apiVersion": c.GetAPIVersion(), "kind": c.GetKind(),
		"name": c.GetName(), "uid": string(c.GetUID()), "controller": true}}}
	if sbFinalizers != nil {
		meta["finalizers"] = sbFinalizers
	}
	s, err := dyn.Resource(relSandboxesGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta,
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "workspace", "image": "busybox"}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Object["status"] = map[string]any{"sandbox": map[string]any{"name": sb},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	if c, err = dyn.Resource(relClaimsGVR).Namespace(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// TestReleaseObserver: on a real API server, Delete (a run's release) of a
// claim bound to its Sandbox reports the release once all are gone: the
// claim's owner, proof mark, creation time and bound Sandbox and the
// Sandbox's creation time and pool as the cluster stored them, and when
// they were gone. A proof claim deleted by DeleteObject (the reconciler's
// way) is reported as proof. A deletion a finalizer holds (caused for
// real: the Sandbox carries one nobody clears) is not reported: its
// Sandbox is still there.
func TestReleaseObserver(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	const ns = "release"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []kubesandbox.Release
	)
	be, err := kubesandbox.New(c.Config(), ns, kubesandbox.WithReleaseObserver(func(r kubesandbox.Release) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	taken := func() []kubesandbox.Release {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	cl, sb := boundClaim(t, dyn, ns, "r-rel", "sb-rel", false, nil)
	before := time.Now()
	if err := be.Delete(ctx, "sb-rel"); err != nil {
		t.Fatal(err)
	}
	rs := taken()
	if len(rs) != 1 {
		t.Fatalf("releases %+v, want the one of sb-rel", rs)
	}
	r := rs[0]
	if r.Claim.Name != cl.GetName() || r.Claim.Owner != "r-rel" || r.Claim.Proof || r.Claim.Bound != "sb-rel" ||
		!r.Claim.Created.Equal(cl.GetCreationTimestamp().Time) {
		t.Errorf("claim %+v, want %s of r-rel bound to sb-rel, created %s", r.Claim, cl.GetName(), cl.GetCreationTimestamp())
	}
	if r.Sandbox.Name != "sb-rel" || !r.Sandbox.Created.Equal(sb.GetCreationTimestamp().Time) || r.Sandbox.Pool != "agents" || r.Sandbox.Suspended {
		t.Errorf("sandbox %+v, want sb-rel of pool agents, created %s", r.Sandbox, sb.GetCreationTimestamp())
	}
	if r.Gone.Before(before) || r.Gone.After(time.Now()) {
		t.Errorf("gone at %s, want within the Delete (from %s)", r.Gone, before)
	}

	// the reconciler's way: the objects as listed, deleted on precondition
	boundClaim(t, dyn, ns, "p-rel", "sb-proof", true, nil)
	objs, err := be.Objects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted := false
	for _, o := range objs {
		if o.Kind == "SandboxClaim" && o.Owner == "p-rel" {
			if err := be.DeleteObject(ctx, o, false); err != nil {
				t.Fatal(err)
			}
			deleted = true
		}
	}
	if !deleted {
		t.Fatalf("no claim of p-rel among %+v", objs)
	}
	if rs := taken(); len(rs) != 1 || !rs[0].Claim.Proof || rs[0].Sandbox.Name != "sb-proof" {
		t.Errorf("releases %+v, want the proof claim's of sb-proof", rs)
	}

	// a Sandbox the reconciler deletes by itself (a warm pool's member):
	// reported with no claim, so its idle time ends even if no sample of
	// the cluster ever saw it
	member, err := dyn.Resource(relSandboxesGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": map[string]any{"name": "sb-member",
			"labels": map[string]any{kubeobjects.LabelPool: "agents"}},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "workspace", "image": "busybox"}}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if objs, err = be.Objects(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind == "Sandbox" && o.Name == "sb-member" {
			if err := be.DeleteObject(ctx, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rs := taken(); len(rs) != 1 || rs[0].Claim.Kind != "" || rs[0].Sandbox.Name != "sb-member" ||
		!rs[0].Sandbox.Created.Equal(member.GetCreationTimestamp().Time) || rs[0].Gone.IsZero() {
		t.Errorf("releases %+v, want sb-member's alone, created %s", rs, member.GetCreationTimestamp())
	}

	// a deletion a finalizer holds
	boundClaim(t, dyn, ns, "r-held", "sb-held", false, []any{"test.slipway.dev/hold"})
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = be.Delete(dctx, "sb-held")
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Delete of a Sandbox a finalizer holds: %v, want its deadline", err)
	}
	if rs := taken(); len(rs) != 0 {
		t.Errorf("releases %+v of a deletion that did not end", rs)
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := dyn.Resource(relSandboxesGVR).Namespace(ns).Patch(ctx, "sb-held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
