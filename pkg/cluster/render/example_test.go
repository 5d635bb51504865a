package render_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "render-example-")
	defer os.RemoveAll(dir)
	_ = gitops.InitBare(filepath.Join(dir, "config.git"), "main")
	repo, _ := gitops.Open(ctx, filepath.Join(dir, "config.git"))

	d := func(c string) string { return "@sha256:" + strings.Repeat(c, 64) }
	g, _ := generation.New("agents", nil, map[generation.Kind]generation.Pin{
		generation.ControlPlane:      {Image: "registry.example/platform/control-plane" + d("a")},
		generation.Runner:            {Image: "registry.example/platform/runner" + d("b")},
		generation.WorkspaceTemplate: {Image: "registry.example/templates/tools" + d("c")},
	}, &generation.Compatibility{RunnerProtocol: generation.Range{Min: 1, Max: 1}, ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}})
	st := pool.NewState("agents")
	st.Generations = []pool.GenState{{ID: g.ID, Sequence: 1, State: pool.Active, WarmSize: 3}}
	_, err := repo.Update(ctx, gitops.Request{Branch: "main", Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		pb, _ := pool.Marshal(pool.Default("agents"))
		sb, _ := pool.Marshal(st)
		gb, _ := generation.Marshal(g)
		_ = t.WriteFile(pool.PoolFile("agents"), pb)
		_ = t.WriteFile(pool.StateFile("agents"), sb)
		_ = t.WriteFile(pool.GenerationFile("agents", g.ID), gb)
		_ = t.WriteFile(pool.KustomizationFile("agents"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: sandboxes\n"))
		return &gitops.Commit{Subject: "agents"}, nil
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	tree, rev, _ := repo.Snapshot(ctx, "main")

	// No policy in this tree: verification is skipped by name.
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, rg := range res.Generations {
		fmt.Println(rg.State, rg.Template == kubeobjects.ObjectName("agents", g.ID), rg.Replicas)
	}
	for _, line := range strings.Split(string(res.YAML), "\n") {
		if strings.HasPrefix(line, "kind:") || strings.Contains(line, "namespace:") || strings.Contains(line, "replicas:") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
	// Output:
	// active true 3
	// kind: SandboxTemplate
	// namespace: sandboxes
	// kind: SandboxWarmPool
	// namespace: sandboxes
	// replicas: 3
}
