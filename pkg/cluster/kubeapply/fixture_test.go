package kubeapply_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// configRepo is a config repository on disk whose pool is rendered after
// every commit.
type configRepo struct {
	tb   testing.TB
	dir  string
	repo *gitops.Repo
	pool string
	gens []*generation.Generation
}

// newConfigRepo makes a repository for pool, whose kustomization puts
// everything in namespace ns (which it also renders), with n generations
// of fixed digests (the render skips verification by name: verification
// is package render's to test).
func newConfigRepo(tb testing.TB, poolName, ns string, n int) *configRepo {
	tb.Helper()
	d := func(c byte, i int) string { return fmt.Sprintf("@sha256:%c%063d", c, i) }
	return newConfigRepoPins(tb, poolName, ns, n, func(i int) map[generation.Kind]generation.Pin {
		return map[generation.Kind]generation.Pin{
			generation.ControlPlane:      {Image: "registry.example/platform/control-plane" + d('a', i)},
			generation.Runner:            {Image: "registry.example/platform/runner" + d('b', i)},
			generation.WorkspaceTemplate: {Image: "registry.example/templates/tools" + d('c', i)},
			generation.RuntimeClass:      {ID: "runc"},
			generation.SecretVersion:     {ID: fmt.Sprintf("vault://kv/agents/token#%d", i)},
		}
	})
}

// newConfigRepoPins is newConfigRepo with generation i's (1-based) pins
// from pins.
func newConfigRepoPins(tb testing.TB, poolName, ns string, n int, pins func(i int) map[generation.Kind]generation.Pin) *configRepo {
	tb.Helper()
	ctx := context.Background()
	dir := filepath.Join(tb.TempDir(), "config.git")
	if err := gitops.InitBare(dir, "main"); err != nil {
		tb.Fatal(err)
	}
	repo, err := gitops.Open(ctx, dir)
	if err != nil {
		tb.Fatal(err)
	}
	c := &configRepo{tb: tb, dir: dir, repo: repo, pool: poolName}
	for i := 1; i <= n; i++ {
		g, err := generation.New(poolName, nil, pins(i), &generation.Compatibility{
			ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1},
		})
		if err != nil {
			tb.Fatal(err)
		}
		g.Sequence = int64(i)
		c.gens = append(c.gens, g)
	}
	f := map[string]string{
		pool.KustomizationFile(poolName): "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns +
			"\nresources:\n  - namespace.yaml\n",
		"pools/" + poolName + "/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
	}
	b, err := pool.Marshal(pool.Default(poolName))
	if err != nil {
		tb.Fatal(err)
	}
	f[pool.PoolFile(poolName)] = string(b)
	for _, g := range c.gens {
		gb, err := generation.Marshal(g)
		if err != nil {
			tb.Fatal(err)
		}
		f[pool.GenerationFile(poolName, g.ID)] = string(gb)
	}
	c.commit(f)
	return c
}

// commit writes files in one commit.
func (c *configRepo) commit(f map[string]string) {
	c.tb.Helper()
	_, err := c.repo.Update(context.Background(), gitops.Request{Branch: "main", Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		for p, s := range f {
			if err := t.WriteFile(p, []byte(s)); err != nil {
				return nil, err
			}
		}
		return &gitops.Commit{Subject: "test"}, nil
	}})
	if err != nil {
		c.tb.Fatal(err)
	}
}

// desire commits a desired.yaml giving generation i (0-based) states[i]
// and warm size sizes[i] (generations past len(states) are left out), and
// renders the pool at that commit.
func (c *configRepo) desire(states []string, sizes []int) *render.Result {
	c.tb.Helper()
	st := pool.NewState(c.pool)
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range states {
		st.Generations = append(st.Generations, pool.GenState{ID: c.gens[i].ID, Sequence: c.gens[i].Sequence, State: s, WarmSize: sizes[i], Since: since})
	}
	b, err := pool.Marshal(st)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.commit(map[string]string{pool.StateFile(c.pool): string(b)})
	return c.render()
}

// render renders the pool at the branch head.
func (c *configRepo) render() *render.Result {
	c.tb.Helper()
	ctx := context.Background()
	tree, rev, err := c.repo.Snapshot(ctx, "main")
	if err != nil {
		c.tb.Fatal(err)
	}
	res, err := render.Pool(ctx, tree, c.pool, rev, render.WithInsecureSkipVerify())
	if err != nil {
		c.tb.Fatal(err)
	}
	return res
}

// name is the object name of generation i.
func (c *configRepo) name(i int) string { return kubeobjects.ObjectName(c.pool, c.gens[i].ID) }
