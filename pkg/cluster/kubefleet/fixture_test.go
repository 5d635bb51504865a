package kubefleet_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

var pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// world is a real node with agent-sandbox's controller, a config
// repository whose pool has generations g[0..], and the pool's fleet.
type world struct {
	t        testing.TB
	c        *kubetest.Cluster
	dyn      dynamic.Interface
	dir      string // the config repository
	poolName string
	ns       string
	gens     []*generation.Generation
	fleet    *kubefleet.Fleet
	prover   *runtimeProver
}

// newWorld starts the node and makes generations whose workspace runs each
// of templates (the image's own entrypoint: it must block), the first one
// active with warm members at size warm. pool.yaml is edited by spec.
func newWorld(t testing.TB, poolName string, warm int, spec func(*pool.Spec), templates ...func(tb testing.TB, w *runtimetest.World) string) *world {
	t.Helper()
	kubetest.SkipUnlessNode(t, "kube-scheduler", "agent-sandbox-controller")
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	rw := runtimetest.New(t, host)
	c := kubetest.New(t)
	if _, err := c.StartNode(ctx, host); err != nil {
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
	rc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc"}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}).Apply(ctx, "runc", rc, metav1.ApplyOptions{FieldManager: "ops"}); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, c: c, dyn: dyn, poolName: poolName, ns: poolName + "-ns", dir: filepath.Join(t.TempDir(), "config.git")}
	if err := c.PrepareNamespace(ctx, w.ns); err != nil {
		t.Fatal(err)
	}
	controlPlane := rw.ControlPlane(t)
	for i, tmpl := range templates {
		g, err := generation.New(poolName, nil, map[generation.Kind]generation.Pin{
			generation.ControlPlane:      {Image: controlPlane},
			generation.Runner:            {Image: rw.Runner},
			generation.WorkspaceTemplate: {Image: tmpl(t, rw)},
			generation.RuntimeClass:      {ID: "runc"},
		}, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}})
		if err != nil {
			t.Fatal(err)
		}
		g.Sequence = int64(i + 1)
		w.gens = append(w.gens, g)
	}
	if err := gitops.InitBare(w.dir, "main"); err != nil {
		t.Fatal(err)
	}
	p := pool.Default(poolName)
	p.Spec.WarmSize = warm
	if spec != nil {
		spec(&p.Spec)
	}
	pb, err := pool.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	st := pool.NewState(poolName)
	st.Generations = []pool.GenState{{ID: w.gens[0].ID, Sequence: 1, State: pool.Active, WarmSize: warm, Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}}
	st.Target = w.gens[0].ID
	sb, err := pool.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		pool.KustomizationFile(poolName): "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + w.ns + "\n",
		pool.PoolFile(poolName):          string(pb),
		pool.StateFile(poolName):         string(sb),
	}
	for _, g := range w.gens {
		b, err := generation.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		files[pool.GenerationFile(poolName, g.ID)] = string(b)
	}
	w.commit(files)
	w.fleet = w.newFleet()
	return w
}

// newFleet is the pool's fleet applying the render of the branch head
// (its own repository handle), proving through the runtime on the
// Kubernetes backend (started once per world).
func (w *world) newFleet() *kubefleet.Fleet {
	w.t.Helper()
	ctx := context.Background()
	repo, err := gitops.Open(ctx, w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	a, err := kubeapply.New(w.c.Config(), kubeapply.WithNamespace(w.ns))
	if err != nil {
		w.t.Fatal(err)
	}
	ra, err := kubefleet.NewRenderApplier(repo, "main", w.poolName, a, render.WithInsecureSkipVerify())
	if err != nil {
		w.t.Fatal(err)
	}
	if w.prover == nil {
		w.prover = startRuntime(w.t, w)
	}
	f, err := kubefleet.New(w.c.Config(), w.poolName, w.ns, kubefleet.WithApplier(ra), kubefleet.WithProver(w.prover))
	if err != nil {
		w.t.Fatal(err)
	}
	return f
}

func (w *world) commit(files map[string]string) {
	w.t.Helper()
	repo, err := gitops.Open(context.Background(), w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	_, err = repo.Update(context.Background(), gitops.Request{Branch: "main", Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		for p, s := range files {
			if err := t.WriteFile(p, []byte(s)); err != nil {
				return nil, err
			}
		}
		return &gitops.Commit{Subject: "test"}, nil
	}})
	if err != nil {
		w.t.Fatal(err)
	}
}

// editPool commits pool.yaml changed by edit.
func (w *world) editPool(edit func(*pool.Spec)) {
	w.t.Helper()
	repo, err := gitops.Open(context.Background(), w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	tree, _, err := repo.Snapshot(context.Background(), "main")
	if err != nil {
		w.t.Fatal(err)
	}
	p, err := pool.ReadPool(w.poolName, tree.ReadFile)
	if err != nil {
		w.t.Fatal(err)
	}
	edit(&p.Spec)
	b, err := pool.Marshal(p)
	if err != nil {
		w.t.Fatal(err)
	}
	w.commit(map[string]string{pool.PoolFile(w.poolName): string(b)})
}

// driver is a rollout driver of the pool on the fleet f.
func (w *world) driver(f rollout.Fleet) *rollout.Driver {
	w.t.Helper()
	repo, err := gitops.Open(context.Background(), w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	return &rollout.Driver{Repo: repo, Pool: w.poolName, Fleet: f, UnsignedEvidence: true, Lease: 20 * time.Second, Poll: 250 * time.Millisecond, Log: testLog{w.t}}
}

type testLog struct{ t testing.TB }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// syncReady syncs the fleet until generation i has want ready warm
// members, or fails the test after timeout.
func (w *world) syncReady(i, want int, timeout time.Duration) *runtimeapi.PoolStatus {
	w.t.Helper()
	ctx := context.Background()
	end := time.Now().Add(timeout)
	var last string
	for {
		if _, err := w.fleet.Sync(ctx); err != nil {
			last = err.Error()
		} else if st, err := w.fleet.PoolStatus(ctx, w.poolName); err != nil {
			last = err.Error()
		} else if g := st.Generation(w.gens[i].ID); g.Ready >= want {
			return st
		} else {
			last = fmt.Sprintf("%d ready, %d warming", g.Ready, g.Warming)
		}
		if time.Now().After(end) {
			w.t.Fatalf("generation %d not %d ready within %s: %s; kubelet log:\n%s", i, want, timeout, last, w.c.Log("kubelet"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// claim makes a SandboxClaim on generation i's warm pool (labels added;
// owner, when given, in the owner annotation as the runtime sets it)
// and waits until it is bound.
func (w *world) claim(name, owner string, i int, labels map[string]string) string {
	w.t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": kubeobjects.ObjectName(w.poolName, w.gens[i].ID)}},
	}}
	if len(labels) > 0 {
		u.SetLabels(labels)
	}
	if owner != "" {
		u.SetAnnotations(map[string]string{kubeobjects.AnnotationOwner: owner})
	}
	if _, err := w.dyn.Resource(kubefleet.SandboxClaims).Namespace(w.ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	sb, err := bound(ctx, w.dyn, w.ns, name, time.Minute)
	if err != nil {
		w.t.Fatal(err)
	}
	return sb
}

// bound waits until claim name is bound to a Ready sandbox and returns
// the sandbox's name.
func bound(ctx context.Context, dyn dynamic.Interface, ns, name string, timeout time.Duration) (string, error) {
	end := time.Now().Add(timeout)
	for {
		u, err := dyn.Resource(kubefleet.SandboxClaims).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		sb, _, _ := unstructured.NestedString(u.Object, "status", "sandbox", "name")
		if sb != "" {
			s, err := dyn.Resource(kubefleet.Sandboxes).Namespace(ns).Get(ctx, sb, metav1.GetOptions{})
			if err == nil && ready(s) {
				return sb, nil
			}
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("claim %s not bound to a ready sandbox within %s: %v", name, timeout, u.Object["status"])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func ready(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// blocking is a workspace template that blocks and ends at once on
// SIGTERM (a pod of it stops without waiting out its grace period).
func blocking(marker string) func(testing.TB, *runtimetest.World) string {
	return func(tb testing.TB, w *runtimetest.World) string {
		return w.TemplateWithEntrypoint(tb, "/bin/sh", "-c", "trap 'exit 0' TERM; echo "+marker+"; sleep 86400 & wait")
	}
}
