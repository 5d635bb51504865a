package kubeapply_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/kubetest"

	"github.com/slipway-dev/slipway/testharness/need"
)

var (
	warmPools = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	templates = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	cms       = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// One API server (etcd and kube-apiserver with agent-sandbox's CRDs) for
// every case; each case has its own pool and namespace.
func TestAgainstAPIServer(t *testing.T) {
	c := kubetest.New(t)
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("CreateThenUnchanged", func(t *testing.T) { testCreateThenUnchanged(t, c, dyn) })
	t.Run("NewGenerationPrunesRemovedWarmPool", func(t *testing.T) { testNewGeneration(t, c) })
	t.Run("ForeignObjectsSurvive", func(t *testing.T) { testForeign(t, c, dyn) })
	t.Run("ConflictNamesManager", func(t *testing.T) { testConflict(t, c, dyn) })
	t.Run("WaitTimesOut", func(t *testing.T) { testWaitTimesOut(t, c) })
	// Last: the controller then runs for the rest of the cluster's life.
	t.Run("WithSandboxController", func(t *testing.T) { testWithController(t, c, dyn) })
}

func newApplier(t *testing.T, c *kubetest.Cluster, opts ...kubeapply.Option) *kubeapply.Applier {
	t.Helper()
	a, err := kubeapply.New(c.Config(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func apply(t *testing.T, a *kubeapply.Applier, res *render.Result) *kubeapply.ChangeSet {
	t.Helper()
	cs, err := a.Apply(context.Background(), res)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return cs
}

// actions is "Kind/ns/name Action" per change, sorted.
func actions(cs *kubeapply.ChangeSet) []string {
	var out []string
	for _, ch := range cs.Changes {
		out = append(out, ch.Ref.String()+" "+string(ch.Action))
	}
	sort.Strings(out)
	return out
}

func wantActions(t *testing.T, cs *kubeapply.ChangeSet, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := actions(cs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// inventory reads the pool's inventory ConfigMap as "Kind/ns/name" lines.
func inventory(t *testing.T, dyn dynamic.Interface, ns, poolName string) []string {
	t.Helper()
	cm, err := dyn.Resource(cms).Namespace(ns).Get(context.Background(), kubeapply.InventoryName(poolName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", kubeapply.InventoryKey)
	var refs []kubeapply.Ref
	if err := json.Unmarshal([]byte(data), &refs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range refs {
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func exists(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) bool {
	t.Helper()
	_, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// opsApply is another team's field manager ("ops") applying obj, forced.
func opsApply(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(context.Background(), u.GetName(), u,
		metav1.ApplyOptions{FieldManager: "ops", Force: true})
	if err != nil {
		t.Fatal(err)
	}
}

func warmPoolReplicas(ns, name string, replicas int) map[string]any {
	return map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": kubeobjects.KindSandboxWarmPool,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"replicas": int64(replicas)},
	}
}

func testCreateThenUnchanged(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface) {
	cr := newConfigRepo(t, "alpha", "alpha-ns", 2)
	res := cr.desire([]string{pool.Active, pool.Warming}, []int{2, 1})
	a := newApplier(t, c)
	cs := apply(t, a, res)
	t0, t1 := cr.name(0), cr.name(1)
	all := []string{"Namespace/alpha-ns", "SandboxTemplate/alpha-ns/" + t0, "SandboxTemplate/alpha-ns/" + t1,
		"SandboxWarmPool/alpha-ns/" + t0, "SandboxWarmPool/alpha-ns/" + t1}
	with := func(action string) []string {
		var out []string
		for _, s := range all {
			out = append(out, s+" "+action)
		}
		return out
	}
	wantActions(t, cs, with("Created")...)
	if cs.Inventory != "alpha-ns/slipway-inventory-alpha" || len(cs.WarmPools) != 2 {
		t.Fatalf("inventory %s, warm pools %v", cs.Inventory, cs.WarmPools)
	}
	// What the CRDs' schemas accepted is what was rendered, field by field.
	if err := c.CheckStored(context.Background(), res.YAML, "default"); err != nil {
		t.Fatal(err)
	}
	wantActions(t, apply(t, a, res), with("Unchanged")...)
	sort.Strings(all)
	if got := inventory(t, dyn, "alpha-ns", "alpha"); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Fatalf("inventory %v, want %v", got, all)
	}
}

func testNewGeneration(t *testing.T, c *kubetest.Cluster) {
	cr := newConfigRepo(t, "beta", "beta-ns", 3)
	a := newApplier(t, c)
	apply(t, a, cr.desire([]string{pool.Active, pool.Warming}, []int{2, 2}))
	// g0 drains (its warm pool goes, its template stays), g1 becomes
	// active, g2 is new. Every object carries the new config revision.
	res := cr.desire([]string{pool.Draining, pool.Active, pool.Warming}, []int{2, 2, 1})
	cs := apply(t, a, res)
	n := func(i int) string { return "beta-ns/" + cr.name(i) }
	wantActions(t, cs,
		"Namespace/beta-ns Updated",
		"SandboxTemplate/"+n(0)+" Updated", "SandboxTemplate/"+n(1)+" Updated", "SandboxTemplate/"+n(2)+" Created",
		"SandboxWarmPool/"+n(0)+" Pruned", "SandboxWarmPool/"+n(1)+" Updated", "SandboxWarmPool/"+n(2)+" Created")
	dyn, _ := c.Dynamic()
	if exists(t, dyn, warmPools, "beta-ns", cr.name(0)) || !exists(t, dyn, templates, "beta-ns", cr.name(0)) {
		t.Fatal("the drained generation's warm pool must be gone and its template kept")
	}
	if err := c.CheckStored(context.Background(), res.YAML, "default"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range apply(t, a, res).Changes {
		if ch.Action != kubeapply.Unchanged {
			t.Fatalf("second apply of one render: %s", ch)
		}
	}
}

func testForeign(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface) {
	cr := newConfigRepo(t, "gamma", "gamma-ns", 2)
	a := newApplier(t, c)
	apply(t, a, cr.desire([]string{pool.Active, pool.Warming}, []int{1, 1}))
	// Someone else's warm pool with Slipway's pool label, never in the
	// inventory, and a co-owned warm pool: ops scaled g1's.
	foreign := warmPoolReplicas("gamma-ns", "gamma-by-hand", 1)
	foreign["metadata"].(map[string]any)["labels"] = map[string]any{kubeobjects.LabelPool: "gamma"}
	foreign["spec"].(map[string]any)["sandboxTemplateRef"] = map[string]any{"name": cr.name(0)}
	opsApply(t, dyn, warmPools, foreign)
	opsApply(t, dyn, warmPools, warmPoolReplicas("gamma-ns", cr.name(1), 3))

	// g1 leaves the pool: its template is Slipway's alone and goes; its
	// warm pool is co-owned and stays; the hand-made one is never looked at.
	cs := apply(t, a, cr.desire([]string{pool.Active}, []int{1}))
	n := func(i int) string { return "gamma-ns/" + cr.name(i) }
	wantActions(t, cs, "Namespace/gamma-ns Updated", "SandboxTemplate/"+n(0)+" Updated", "SandboxWarmPool/"+n(0)+" Updated",
		"SandboxTemplate/"+n(1)+" Pruned", "SandboxWarmPool/"+n(1)+" Kept")
	for _, ch := range cs.Changes {
		if ch.Action == kubeapply.Kept && !strings.Contains(ch.Reason, `field manager "ops"`) {
			t.Fatalf("kept without naming the other manager: %s", ch)
		}
	}
	if !exists(t, dyn, warmPools, "gamma-ns", "gamma-by-hand") || !exists(t, dyn, warmPools, "gamma-ns", cr.name(1)) {
		t.Fatal("an object someone else owns was pruned")
	}
	if exists(t, dyn, templates, "gamma-ns", cr.name(1)) {
		t.Fatal("the template only Slipway owned was not pruned")
	}
	// A kept object stays in the inventory: it is reported on every apply.
	inv := strings.Join(inventory(t, dyn, "gamma-ns", "gamma"), " ")
	if !strings.Contains(inv, "SandboxWarmPool/"+n(1)) || strings.Contains(inv, "SandboxTemplate/"+n(1)) || strings.Contains(inv, "gamma-by-hand") {
		t.Fatalf("inventory: %s", inv)
	}
}

func testConflict(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface) {
	cr := newConfigRepo(t, "delta", "delta-ns", 2)
	apply(t, newApplier(t, c), cr.desire([]string{pool.Active}, []int{1}))
	opsApply(t, dyn, warmPools, warmPoolReplicas("delta-ns", cr.name(0), 4))

	// Templates go before warm pools: g1's template is created, then g0's
	// warm pool conflicts.
	res := cr.desire([]string{pool.Active, pool.Warming}, []int{2, 1})
	cs, err := newApplier(t, c).Apply(context.Background(), res)
	var ce *kubeapply.ConflictError
	if !errors.Is(err, kubeapply.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("want a conflict, got %v", err)
	}
	want := "SandboxWarmPool/delta-ns/" + cr.name(0)
	if ce.Object.String() != want || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"ops"`) ||
		!strings.Contains(err.Error(), ".spec.replicas") {
		t.Fatalf("the conflict must name the object, the other manager and the field: %v", err)
	}
	if got := strings.Join(actions(cs), "\n"); !strings.Contains(got, "SandboxTemplate/delta-ns/"+cr.name(1)+" Created") {
		t.Fatalf("before the conflict:\n%s", got)
	}
	// What was created before the error is in the inventory: a later
	// render without it prunes it.
	if inv := strings.Join(inventory(t, dyn, "delta-ns", "delta"), " "); !strings.Contains(inv, "SandboxTemplate/delta-ns/"+cr.name(1)) {
		t.Fatalf("a template created before a failed apply is not in the inventory: %s", inv)
	}
	cs = apply(t, newApplier(t, c, kubeapply.WithForceConflicts()), res)
	if got := strings.Join(actions(cs), "\n"); !strings.Contains(got, want+" Updated") {
		t.Fatalf("forced:\n%s", got)
	}
	u, err := dyn.Resource(warmPools).Namespace("delta-ns").Get(context.Background(), cr.name(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); r != 2 {
		t.Fatalf("replicas %d after a forced apply, want 2", r)
	}
}

// No kubelet runs here: warm pools never become ready, and Wait names them.
func testWaitTimesOut(t *testing.T, c *kubetest.Cluster) {
	cr := newConfigRepo(t, "eps", "eps-ns", 2)
	a := newApplier(t, c)
	cs := apply(t, a, cr.desire([]string{pool.Active, pool.Warming}, []int{2, 1}))
	start := time.Now()
	_, err := a.Wait(context.Background(), cs.WarmPools, 1500*time.Millisecond)
	var nr *kubeapply.NotReadyError
	if !errors.Is(err, kubeapply.ErrNotReady) || !errors.As(err, &nr) || len(nr.Pools) != 2 {
		t.Fatalf("want two pools not ready, got %v", err)
	}
	if d := time.Since(start); d < 1500*time.Millisecond || d > 10*time.Second {
		t.Fatalf("waited %s for a 1.5s timeout", d)
	}
	for i, want := range []string{fmt.Sprintf("SandboxWarmPool/eps-ns/%s 0/2 ready", cr.name(0)), fmt.Sprintf("SandboxWarmPool/eps-ns/%s 0/1 ready", cr.name(1))} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("pool %d: %v lacks %q", i, err, want)
		}
	}
}

// With agent-sandbox's own controller: a warm pool of the render makes
// Sandboxes from its template, and the controller's label on a template
// (a metadata-only field manager) and its status writes on a warm pool do
// not keep Slipway from pruning them.
func testWithController(t *testing.T, c *kubetest.Cluster, dyn dynamic.Interface) {
	_, err := kubetest.Binary("agent-sandbox-controller")
	need.Err(t, err)
	ctx := context.Background()
	if err := c.StartSandboxController(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.PrepareNamespace(ctx, "zeta-ns"); err != nil {
		t.Fatal(err)
	}
	cr := newConfigRepo(t, "zeta", "zeta-ns", 2)
	a := newApplier(t, c)
	apply(t, a, cr.desire([]string{pool.Active, pool.Warming}, []int{1, 2}))
	sandboxes := schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	deadline := time.Now().Add(90 * time.Second)
	for {
		list, err := dyn.Resource(sandboxes).Namespace("zeta-ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := dyn.Resource(templates).Namespace("zeta-ns").Get(ctx, cr.name(1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		labelled := false
		for _, mf := range tmpl.GetManagedFields() {
			labelled = labelled || (mf.Manager != kubeapply.FieldManager && mf.Subresource == "")
		}
		if len(list.Items) >= 3 && labelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s: %d sandboxes (want 3), template labelled by the controller: %v; controller log:\n%s",
				len(list.Items), labelled, c.Log("agent-sandbox-controller"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	cs := apply(t, a, cr.desire([]string{pool.Active}, []int{1}))
	n := func(i int) string { return "zeta-ns/" + cr.name(i) }
	wantActions(t, cs, "Namespace/zeta-ns Updated", "SandboxTemplate/"+n(0)+" Updated", "SandboxWarmPool/"+n(0)+" Updated",
		"SandboxTemplate/"+n(1)+" Pruned", "SandboxWarmPool/"+n(1)+" Pruned")
}
