package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

var (
	claimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	warmPoolsGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
)

// create creates obj in ns and returns it as stored.
func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func controlledBy(u *unstructured.Unstructured) []any {
	return []any{map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "name": u.GetName(), "uid": string(u.GetUID()), "controller": true}}
}

func sandboxObject(name string, meta map[string]any) map[string]any {
	meta["name"] = name
	return map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta,
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "workspace", "image": "busybox"}}}}}}
}

// TestServeOnKube: `runtime serve` on the Kubernetes backend runs the
// cleanup reconciler and keeps the cost ledger, against a real API server
// (etcd, kube-apiserver, agent-sandbox's CRDs; the objects written as
// agent-sandbox's controller leaves them, no controller running). A warm
// pool of a generation the config repository does not keep warm (with
// its member) and a claim of a run the runtime never recorded (bound to
// its Sandbox) are swept while it serves; GET /v1/cleanup and the records
// file `slipway cleanup list` reads show it. The ledger in the state
// directory (what `slipway cost` reads) holds the member's warm idle time
// and the claim's active time for its run, from the objects' own
// timestamps, each ended when the cluster deleted it.
func TestServeOnKube(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	const ns = "serve"
	if err := c.PrepareNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	repo := configRepo(ctx, t)
	state := t.TempDir()
	rt := startServed(ctx, t, serve.Config{Backend: serve.BackendKubernetes, Kubeconfig: c.Kubeconfig(), Namespace: ns,
		Repo: repo, State: state, Verify: runtime.Verify{Skip: true},
		SyncInterval: 300 * time.Millisecond, ReconcileInterval: time.Second, StorageEvery: 200 * time.Millisecond})
	addr, log := rt.addr, rt.log

	const gen = "g-2222222222222222222222222222222222222222222222222222222222222222"
	labels := map[string]any{kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	ann := map[string]any{kubeobjects.AnnotationGenerationID: gen}
	wp := create(t, dyn, warmPoolsGVR, ns, map[string]any{"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": kubeobjects.ObjectName("agents", gen), "labels": labels, "annotations": ann},
		"spec":     map[string]any{"replicas": int64(1), "sandboxTemplateRef": map[string]any{"name": "t"}}})
	member := create(t, dyn, sandboxesGVR, ns, sandboxObject("member-1", map[string]any{"labels": labels, "annotations": ann, "ownerReferences": controlledBy(wp)}))
	claimLabels := map[string]any{kubesandbox.LabelClaim: "true", kubeobjects.LabelPool: "agents", kubeobjects.LabelGeneration: kubeobjects.GenerationLabel(gen)}
	claimName := kubesandbox.ClaimName("r-ghost")
	cl := create(t, dyn, claimsGVR, ns, map[string]any{"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": claimName, "labels": claimLabels, "annotations": map[string]any{kubesandbox.AnnotationOwner: "r-ghost", kubeobjects.AnnotationGenerationID: gen}},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": wp.GetName()}}})
	create(t, dyn, sandboxesGVR, ns, sandboxObject("sb-ghost", map[string]any{"labels": labels, "annotations": ann, "ownerReferences": controlledBy(cl)}))
	cl.Object["status"] = map[string]any{"sandbox": map[string]any{"name": "sb-ghost"},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "bound", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	if _, err := dyn.Resource(claimsGVR).Namespace(ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	get := func(path string) []byte {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	deadline := time.Now().Add(reconcile.DefaultGrace + 30*time.Second)
	for {
		var v reconcile.Remaining
		if err := json.Unmarshal(get("/v1/cleanup"), &v); err != nil {
			t.Fatal(err)
		}
		done := map[string]string{}
		for _, r := range v.Recent {
			if r.State == reconcile.StateDone {
				done[r.Resource] = r.Kind
			}
		}
		if done["SandboxClaim/"+claimName] == reconcile.KindNoLease && done["SandboxWarmPool/"+wp.GetName()] == reconcile.KindWarmInactive &&
			done["Sandbox/"+member.GetName()] == reconcile.KindWarmInactive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned: %+v\n%s", v, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{claimsGVR, claimName}, {sandboxesGVR, "sb-ghost"}, {sandboxesGVR, member.GetName()}, {warmPoolsGVR, wp.GetName()}} {
		if _, err := dyn.Resource(g.gvr).Namespace(ns).Get(ctx, g.name, metav1.GetOptions{}); err == nil {
			t.Errorf("%s %s still there", g.gvr.Resource, g.name)
		}
	}
	time.Sleep(500 * time.Millisecond) // the ledger's observer sees them gone
	rt.stop(t)

	// what `slipway cleanup list --state` reads
	rs, err := reconcile.ReadRecords(ctx, filepath.Join(state, reconcile.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if v, err := reconcile.View(ctx, rs, 20); err != nil || len(v.Recent) < 3 {
		t.Fatalf("records file: %+v %v", v, err)
	}
	// what `slipway cost --state` reads
	recs, err := cost.Open(ctx, filepath.Join(state, cost.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()
	rep, err := recs.Pool(ctx, "agents", cost.Window{Since: member.GetCreationTimestamp().Add(-time.Minute), Until: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[cost.State]cost.StateTime{}
	for _, s := range rep.States {
		by[s.State] = s
	}
	if w := by[cost.WarmIdle]; w.Intervals != 1 || w.Open != 0 || w.Seconds <= 0 {
		t.Errorf("warm idle: %+v", w)
	}
	if a := by[cost.Active]; a.Intervals != 1 || a.Open != 0 || a.Seconds < 1 {
		t.Errorf("active: %+v", a)
	}
	rc, err := recs.Run(ctx, "r-ghost", nil, nil, time.Now())
	if err != nil {
		t.Fatalf("the ghost run's cost: %v", err)
	}
	if len(rc.Terms) == 0 || rc.Terms[0].Quantity == nil || *rc.Terms[0].Quantity <= 0 {
		t.Errorf("run cost terms: %+v", rc.Terms)
	}
}
