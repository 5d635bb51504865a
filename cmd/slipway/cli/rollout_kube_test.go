package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/gitops"
	"github.com/slipway-dev/slipway/pkg/kubefleet"
	"github.com/slipway-dev/slipway/pkg/kubetest"
	"github.com/slipway-dev/slipway/pkg/pool"
	"github.com/slipway-dev/slipway/pkg/render"
)

// rollout start --kubeconfig drives the seven steps on a cluster: on a
// real API server with no kubelet, the new generation's warm pool never
// becomes ready, so the rollout rolls back at the pool's warm deadline
// (exit 1), and the cluster is synced to the rollback commit at once (the
// new warm pool pruned). --server and --kubeconfig exclude each other.
func TestRolloutStartKubeconfig(t *testing.T) {
	c := kubetest.New(t)
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1", "templates/tools:v2")
	dir := t.TempDir()
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, tmpl := range []string{"templates/tools:v1", "templates/tools:v2"} {
		gen := filepath.Join(dir, fmt.Sprintf("g%d.yaml", i))
		args := []string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
			"--pin", "controlPlane=" + img("platform/cp:v1"), "--pin", "runner=" + img("platform/runner:v1"),
			"--pin", "workspaceTemplate=" + img(tmpl), "--control-plane-protocol", "1", "--runner-protocol", "1"}
		if i > 0 {
			args = append(args, "--from", filepath.Join(dir, "g0.yaml"))
		}
		if r := run(t, "", args...); r.code != 0 {
			t.Fatal(r)
		}
		g, err := generation.Load(gen)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
		args = []string{"promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--insecure-skip-verify"}
		if i == 0 {
			args = append(args, "--activate")
		}
		if r := run(t, "", args...); r.code != 0 {
			t.Fatal(r)
		}
	}
	// The warm phase ends at 5s.
	ctx := context.Background()
	r0, err := gitops.Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r0.Update(ctx, gitops.Request{Branch: "main", Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
		p, err := pool.ReadPool("agents", tr.ReadFile)
		if err != nil {
			return nil, err
		}
		p.Spec.PhaseDeadlines["warm"] = pool.Duration{Duration: 5 * time.Second}
		b, err := pool.Marshal(p)
		if err != nil {
			return nil, err
		}
		return &gitops.Commit{Subject: "warm deadline 5s"}, tr.WriteFile(pool.PoolFile("agents"), b)
	}}); err != nil {
		t.Fatal(err)
	}

	base := []string{"--repo", repo, "--pool", "agents", "--unsigned-evidence", "--insecure-skip-verify"}
	if r := run(t, "", append([]string{"rollout", "resume", "--server", "http://127.0.0.1:1", "--kubeconfig", c.Kubeconfig()}, base...)...); r.code != 2 || !strings.Contains(r.stderr, "exclude each other") {
		t.Fatalf("--server with --kubeconfig: %+v", r)
	}
	r := run(t, "", append([]string{"rollout", "start", "--to", ids[1], "--wait", "--kubeconfig", c.Kubeconfig(), "--namespace", "default", "--poll", "100ms"}, base...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "rolled-back") || !strings.Contains(r.stdout, "step 2, warm capacity not ready by the phase deadline: 0 of 2 warm members of "+ids[1]) ||
		!strings.Contains(r.stderr, "the cluster serves ") {
		t.Fatalf("rollout start --kubeconfig: %+v", r)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	wp := dyn.Resource(kubefleet.SandboxWarmPools).Namespace("default")
	if _, err := wp.Get(ctx, render.ObjectName("agents", ids[1]), metav1.GetOptions{}); err == nil {
		t.Fatal("the rolled-back generation's warm pool is still in the cluster")
	}
	if _, err := wp.Get(ctx, render.ObjectName("agents", ids[0]), metav1.GetOptions{}); err != nil {
		t.Fatalf("the active generation's warm pool: %v", err)
	}
}

// --prover names the runtime that proves on a cluster: it is for
// --kubeconfig only (a runtime at --server proves by itself) and needs the
// runtime's token from --token-file.
func TestRolloutProverFlag(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("runtime-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"rollout", "start", "--repo", repo, "--pool", "agents", "--to", "g-1", "--wait", "--unsigned-evidence", "--prover", "http://127.0.0.1:1"}
	if r := run(t, "", append(base, "--server", "http://127.0.0.1:1", "--token-file", tok)...); r.code != 2 || !strings.Contains(r.stderr, "--prover is for --kubeconfig") {
		t.Fatalf("--prover with --server: %+v", r)
	}
	if r := run(t, "", append(base, "--kubeconfig", kc)...); r.code != 2 || !strings.Contains(r.stderr, "--token-file is required") {
		t.Fatalf("--prover without --token-file: %+v", r)
	}
}
