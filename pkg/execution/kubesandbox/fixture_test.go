//go:build linux

package kubesandbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/testharness/kubetest"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// node is a real single-node cluster with agent-sandbox's controller, a
// registry holding a runner and a busybox template, and a pool whose
// generations are rendered and applied in namespace ns.
type node struct {
	c     *kubetest.Cluster
	w     *runtimetest.World
	ns    string
	pool  string
	gens  []*generation.Generation
	repo  *gitops.Repo
	dir   string // the config repository
	apply *kubeapply.Applier
}

// startNode starts it, or skips the test when a node cannot run here.
func startNode(t testing.TB, poolName string) *node {
	t.Helper()
	kubetest.SkipUnlessNode(t, "kube-scheduler", "agent-sandbox-controller")
	ctx := context.Background()
	host := registrytest.NewInProcess(t)
	n := &node{w: runtimetest.New(t, host), ns: poolName + "-ns", pool: poolName}
	n.c = kubetest.New(t)
	if _, err := n.c.StartNode(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := n.c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.c.StartSandboxController(ctx); err != nil {
		t.Fatal(err)
	}
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	rc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": map[string]any{"name": "runc"}, "handler": "runc",
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"}).
		Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.c.PrepareNamespace(ctx, n.ns); err != nil {
		t.Fatal(err)
	}
	if n.apply, err = kubeapply.New(n.c.Config()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(dir, "main"); err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	if n.repo, err = gitops.Open(ctx, dir); err != nil {
		t.Fatal(err)
	}
	b, err := pool.Marshal(pool.Default(poolName))
	if err != nil {
		t.Fatal(err)
	}
	n.commit(t, map[string]string{
		pool.KustomizationFile(poolName): "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + n.ns + "\n",
		pool.PoolFile(poolName):          string(b),
	})
	return n
}

// generation adds a generation of the world's runner and template (pinned
// runtime class runc) following from.
func (n *node) generation(t testing.TB, from *generation.Generation) *generation.Generation {
	t.Helper()
	return n.generationOf(t, from, "")
}

// generationOf is generation with template templateRef ("": the world's).
func (n *node) generationOf(t testing.TB, from *generation.Generation, templateRef string) *generation.Generation {
	t.Helper()
	return n.generationPinning(t, from, templateRef, nil)
}

// generationPinning is generationOf with the pins of extra added.
func (n *node) generationPinning(t testing.TB, from *generation.Generation, templateRef string, extra generation.Pins) *generation.Generation {
	t.Helper()
	g := n.w.Generation(t, n.pool, from, templateRef)
	g.Pins[generation.RuntimeClass] = generation.Pin{ID: "runc"}
	for k, p := range extra {
		g.Pins[k] = p
	}
	var compat *generation.Compatibility
	if from == nil {
		compat = &g.Compatibility
	}
	g, err := generation.New(n.pool, from, g.Pins, compat)
	if err != nil {
		t.Fatal(err)
	}
	g.Sequence = int64(len(n.gens) + 1)
	gb, err := generation.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	n.commit(t, map[string]string{pool.GenerationFile(n.pool, g.ID): string(gb)})
	n.gens = append(n.gens, g)
	return g
}

// desire renders and applies a desired state (the first generation
// active, the others warming, each of warm size size), waits until every
// warm pool is ready, and returns the runtime's desired state of it.
func (n *node) desire(t testing.TB, size int) *runtime.Desired {
	t.Helper()
	ctx := context.Background()
	st := pool.NewState(n.pool)
	for i, g := range n.gens {
		state := pool.Warming
		if i == 0 {
			state = pool.Active
		}
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: state, WarmSize: size,
			Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
	}
	b, err := pool.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	n.commit(t, map[string]string{pool.StateFile(n.pool): string(b)})
	tree, rev, err := n.repo.Snapshot(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	res, err := render.Pool(ctx, tree, n.pool, rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.apply.Apply(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.apply.Wait(ctx, cs.WarmPools, 3*time.Minute); err != nil {
		t.Fatalf("%v; kubelet log:\n%s", err, n.c.Log("kubelet"))
	}
	d := runtimetest.Desired(rev, n.pool, size, n.gens...)
	return d
}

func (n *node) commit(t testing.TB, f map[string]string) {
	t.Helper()
	_, err := n.repo.Update(context.Background(), gitops.Request{Branch: "main", Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
		for p, s := range f {
			if err := tr.WriteFile(p, []byte(s)); err != nil {
				return nil, err
			}
		}
		return &gitops.Commit{Subject: "test"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// pulled is the image at ref.
func pulled(t testing.TB, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
