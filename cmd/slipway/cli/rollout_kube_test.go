package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/pkg/cluster/kubefleet"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// rollout start --kubeconfig drives the seven steps on a cluster: on a
// real API server with no kubelet, the new generation's warm pool never
// becomes ready, so the rollout rolls back at the pool's warm deadline
// (exit 1), and the cluster is synced to the rollback commit at once (the
// new warm pool pruned). --server and --kubeconfig exclude each other.
// kubeRolloutRepo is a config repository whose pool agents has g0 active
// and g1 promoted (images in an in-process registry), with a warm phase
// deadline of 5s.
func kubeRolloutRepo(t *testing.T) (string, []string) {
	t.Helper()
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

	return repo, ids
}

func TestRolloutStartKubeconfig(t *testing.T) {
	c := kubetest.New(t)
	repo, ids := kubeRolloutRepo(t)
	ctx := context.Background()
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
	if _, err := wp.Get(ctx, kubeobjects.ObjectName("agents", ids[1]), metav1.GetOptions{}); err == nil {
		t.Fatal("the rolled-back generation's warm pool is still in the cluster")
	}
	if _, err := wp.Get(ctx, kubeobjects.ObjectName("agents", ids[0]), metav1.GetOptions{}); err != nil {
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

// rollout --kubeconfig --argocd-application: Argo CD is the applier, so a
// step is served only once the pool's Application reports its commit as
// synced and healthy (and the objects in the cluster carry it). On a real
// API server with Argo CD's own Application CRD (read from its module) and
// no application controller: while the Application stays OutOfSync the
// warm phase gets no answer and the rollout fails resumably (exit 1,
// nothing rolled back); the test then does the controller's part (applies
// the branch head as the plugin would render it and writes the
// Application's status as Argo CD does), and resume reaches the warm
// phase's real verdict: no kubelet, so no warm member, rolled back, and
// the rollback commit is applied by "Argo CD", not by Slipway.
func TestRolloutArgoCDApplier(t *testing.T) {
	c := kubetest.New(t)
	ctx := context.Background()
	dir, err := kubetest.ModuleDir(ctx, "github.com/argoproj/argo-cd/v2", "v2.14.21")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(ctx, filepath.Join(dir, "manifests", "crds", "application-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.PrepareNamespace(ctx, "argocd"); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	repo, ids := kubeRolloutRepo(t)
	apps := dyn.Resource(argocd.ApplicationResource).Namespace("argocd")
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "pool-agents", "namespace": "argocd"},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "file://" + repo, "path": "pools/agents", "targetRevision": "main", "plugin": map[string]any{"name": "slipway-v1"}},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "default"},
		},
		"status": map[string]any{"sync": map[string]any{"status": "OutOfSync"}, "health": map[string]any{"status": "Missing"}},
	}}
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	base := []string{"--repo", repo, "--pool", "agents", "--unsigned-evidence", "--insecure-skip-verify", "--poll", "100ms"}
	if r := run(t, "", append([]string{"rollout", "resume", "--server", "http://127.0.0.1:1", "--argocd-application", "argocd/pool-agents"}, base...)...); r.code != 2 || !strings.Contains(r.stderr, "--argocd-application is for --kubeconfig") {
		t.Fatalf("--argocd-application without --kubeconfig: %+v", r)
	}
	kube := []string{"--kubeconfig", c.Kubeconfig(), "--namespace", "default", "--argocd-application", "argocd/pool-agents"}
	r := run(t, "", append(append([]string{"rollout", "start", "--to", ids[1], "--wait"}, kube...), base...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "step 2, the fleet did not answer by the phase deadline") ||
		!strings.Contains(r.stdout, "argocd: application argocd/pool-agents: not synced and healthy yet: sync OutOfSync, health Missing") {
		t.Fatalf("rollout start with the Application out of sync: %+v", r)
	}
	wp := dyn.Resource(kubefleet.SandboxWarmPools).Namespace("default")
	if l, err := wp.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("Slipway applied objects itself with Argo CD as the applier: %v %v", l, err)
	}

	// Argo CD's part: each new head of the branch is applied (the render,
	// as the plugin prints it) and reported synced and healthy.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			applied := ""
			for {
				select {
				case <-stop:
					return nil
				case <-time.After(100 * time.Millisecond):
				}
				r0, err := gitops.Open(ctx, repo)
				if err != nil {
					return err
				}
				_, head, err := r0.Snapshot(ctx, "main")
				if err != nil {
					return err
				}
				if head == applied {
					continue
				}
				var out, errb bytes.Buffer
				if code := Main([]string{"apply", "--repo", repo, "--pool", "agents", "--kubeconfig", c.Kubeconfig(), "--insecure-skip-verify", "--revision", head}, strings.NewReader(""), &out, &errb); code != 0 {
					return fmt.Errorf("apply %s: exit %d: %s", head, code, errb.String())
				}
				got, err := apps.Get(ctx, "pool-agents", metav1.GetOptions{})
				if err != nil {
					return err
				}
				got.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced", "revision": head}, "health": map[string]any{"status": "Healthy"}}
				if _, err := apps.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
					return err
				}
				applied = head
			}
		}()
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("argo cd's part: %v", err)
		}
	}()
	r = run(t, "", append(append([]string{"rollout", "resume"}, kube...), base...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "rolled-back") || !strings.Contains(r.stdout, "step 2, warm capacity not ready by the phase deadline: 0 of 2 warm members of "+ids[1]) {
		t.Fatalf("rollout resume once Argo CD syncs: %+v", r)
	}
	// The rollback commit reaches the cluster through Argo CD: g1's warm
	// pool is pruned, g0's stays.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := wp.Get(ctx, kubeobjects.ObjectName("agents", ids[1]), metav1.GetOptions{})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rolled-back generation's warm pool is still in the cluster")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := wp.Get(ctx, kubeobjects.ObjectName("agents", ids[0]), metav1.GetOptions{}); err != nil {
		t.Fatalf("the active generation's warm pool: %v", err)
	}
}
