//go:build linux

package kubesandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
)

var (
	claimsGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	sandboxesGVR = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	warmPoolsGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	podsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// specOf is the spec of a claim of generation g for owner.
func specOf(t testing.TB, n *node, g *generation.Generation, owner string) sandbox.Spec {
	t.Helper()
	d, err := name.NewDigest(g.Pins[generation.WorkspaceTemplate].Image)
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{Pool: n.pool, Generation: g.ID, Owner: owner, TemplateID: d.DigestStr(),
		Runner: sandbox.RunnerBinary{Digest: runnerDigest(t, n)}}
}

// gone fails the test unless the object of gvr is gone.
func gone(t testing.TB, n *node, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace(n.ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s %s/%s still there: %v", gvr.Resource, n.ns, name, err)
	}
}

// A claim on a warm pool gets a ready warm member (launch type warm,
// placed on the node with the pinned runtime class), runs commands
// through its runner (stdout, exit code), and Delete releases it: the
// claim, its Sandbox and its pod are gone. A claim on a generation with no
// warm pool fails at once (sandbox.ErrGenerationGone), one on a warm pool
// that never binds (its template missing) at its deadline; both are
// deleted with their claim objects; a claim of an owner whose
// claim name another owner's claim holds is refused.
func TestClaimExecRelease(t *testing.T) {
	n := startNode(t, "claims")
	g := n.generation(t, nil)
	n.desire(t, 2)
	ctx := context.Background()
	b, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithClusterName("test-cluster"), kubesandbox.WithReadyTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := b.Create(ctx, specOf(t, n, g, "r-claim-1"))
	if err != nil {
		t.Fatalf("create: %v; controller log:\n%s", err, n.c.Log("agent-sandbox-controller"))
	}
	t.Logf("warm claim to a proven runner: %s", time.Since(start).Round(time.Millisecond))
	if s.Owner != "r-claim-1" || s.Generation != g.ID || s.State != sandbox.StateRunning || s.Placement == nil {
		t.Fatalf("sandbox %+v", s)
	}
	pl := s.Placement
	if pl.LaunchType != sandbox.LaunchWarm || pl.Cluster != "test-cluster" || pl.Namespace != n.ns || pl.NodeID == "" ||
		pl.RuntimeClass != "runc" || pl.NodeImageID == "" {
		t.Fatalf("placement %+v", pl)
	}
	var out bytes.Buffer
	st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "echo hello from $SLIPWAY_SANDBOX_ID; exit 5"}}, &out, &out)
	if err != nil || st.ExitCode != 5 || out.String() != "hello from "+s.ID+"\n" {
		t.Fatalf("exec: %+v %v %q", st, err, out.String())
	}
	listed, err := b.List(ctx, sandbox.Filter{Pool: n.pool})
	if err != nil || len(listed) != 1 || listed[0].ID != s.ID || listed[0].Owner != "r-claim-1" || listed[0].State != sandbox.StateRunning {
		t.Fatalf("list: %v %+v", err, listed)
	}
	counts, err := b.WarmCounts(ctx, n.pool)
	if err != nil || counts[g.ID].Replicas != 2 {
		t.Fatalf("warm counts: %v %+v", err, counts)
	}

	start = time.Now()
	if err := b.Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("release: %s", time.Since(start).Round(time.Millisecond))
	gone(t, n, claimsGVR, kubesandbox.ClaimName("r-claim-1"))
	gone(t, n, sandboxesGVR, s.ID)
	gone(t, n, podsGVR, s.ID)
	if err := b.Delete(ctx, s.ID); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
	if listed, _ := b.List(ctx, sandbox.Filter{}); len(listed) != 0 {
		t.Errorf("listed after release: %+v", listed)
	}

	// A generation with no warm pool (as one a rollout drained): its claim
	// fails at once, long before its deadline, and is deleted.
	other := n.generation(t, g)
	long, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithReadyTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = long.Create(ctx, specOf(t, n, other, "r-no-pool"))
	took := time.Since(start)
	if !errors.Is(err, sandbox.ErrGenerationGone) || !strings.Contains(err.Error(), kubeobjects.ObjectName(n.pool, other.ID)) || took > time.Minute {
		t.Fatalf("a claim on a generation with no warm pool: %v after %s; want ErrGenerationGone naming its warm pool, well before the 2m deadline", err, took.Round(time.Millisecond))
	}
	t.Logf("a claim on a generation with no warm pool failed after %s", took.Round(time.Millisecond))
	gone(t, n, claimsGVR, kubesandbox.ClaimName("r-no-pool"))

	// A warm pool whose SandboxTemplate is missing: its claim never binds,
	// and fails at its deadline with what its Ready condition said.
	orphan := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubeobjects.ExtensionsAPIVersion, "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": kubeobjects.ObjectName(n.pool, other.ID), "namespace": n.ns},
		"spec":     map[string]any{"replicas": int64(1), "sandboxTemplateRef": map[string]any{"name": "no-such-template"}},
	}}
	dyn, err := n.c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(warmPoolsGVR).Namespace(n.ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	short, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithReadyTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = short.Create(ctx, specOf(t, n, other, "r-unbound"))
	if !errors.Is(err, kubesandbox.ErrNotReady) || !strings.Contains(err.Error(), "not bound to a sandbox") {
		t.Fatalf("a claim that never binds: %v", err)
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName("r-unbound"))
	if err := dyn.Resource(warmPoolsGVR).Namespace(n.ns).Delete(ctx, orphan.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Owners whose claim names collide: the second is refused.
	s1, err := b.Create(ctx, specOf(t, n, g, "r-Same"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Delete(ctx, s1.ID)
	if kubesandbox.ClaimName("r-Same") == kubesandbox.ClaimName("r-same") {
		t.Fatalf("claim names collide: %s", kubesandbox.ClaimName("r-same"))
	}
	if _, err := b.Create(ctx, sandbox.Spec{Pool: n.pool, Generation: g.ID, Owner: sandbox.OwnerWarm}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("a warm member by Create: %v", err)
	}
	// Warm members proved once, when Ready (ProveWarm): a claim bound to
	// one takes its proof, checked against the claim's spec as a fresh one
	// is; no exec on the claim's path.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.ProveWarm(pctx)
	allProved := func() {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); b.ProvedWarm() < 2; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d warm members proved after 2m, want 2", b.ProvedWarm())
			}
		}
	}
	allProved()
	before := kubesandbox.PathProofs(b)
	s2, err := b.Create(ctx, specOf(t, n, g, "r-proved"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Delete(ctx, s2.ID)
	if got := kubesandbox.PathProofs(b) - before; got != 0 || s2.RunnerBinarySHA256 != runnerDigest(t, n) {
		t.Errorf("a claim of a proved member: %d proofs on its path, runner %s", got, s2.RunnerBinarySHA256)
	}
	out.Reset()
	if st, err := s2.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "echo $SLIPWAY_SANDBOX_ID"}}, &out, &out); err != nil || st.ExitCode != 0 || out.String() != s2.ID+"\n" {
		t.Fatalf("exec in a proved member: %+v %v %q", st, err, out.String())
	}
	allProved()
	wrong := specOf(t, n, g, "r-wrong-runner")
	wrong.Runner.Digest = "sha256:" + strings.Repeat("0", 64)
	before = kubesandbox.PathProofs(b)
	if _, err := b.Create(ctx, wrong); !errors.Is(err, sandbox.ErrIdentity) || !strings.Contains(err.Error(), "the pinned runner image records") {
		t.Errorf("a claim whose runner pin differs from the proved member's: %v", err)
	}
	if got := kubesandbox.PathProofs(b) - before; got != 0 {
		t.Errorf("%d proofs on the path of a claim of a proved member", got)
	}
}

// The runtime is killed (SIGKILL) while it holds a claim; a new backend
// finds the claim again by its name (the owner's), with List and with a
// Create for the same owner (the same sandbox, not a second one), runs a
// command in it and releases it.
func TestKillMidClaim(t *testing.T) {
	if os.Getenv("KUBE_CHILD_KUBECONFIG") != "" {
		killedChild(t)
		return
	}
	n := startNode(t, "killed")
	g := n.generation(t, nil)
	n.desire(t, 1)
	spec := specOf(t, n, g, "r-killed-1")
	child := exec.Command(os.Args[0], "-test.run=^TestKillMidClaim$", "-test.v")
	child.Env = append(os.Environ(), "KUBE_CHILD_KUBECONFIG="+n.c.Kubeconfig(), "KUBE_CHILD_NS="+n.ns, "KUBE_CHILD_POOL="+n.pool,
		"KUBE_CHILD_GEN="+g.ID, "KUBE_CHILD_OWNER="+spec.Owner, "KUBE_CHILD_RUNNER="+spec.Runner.Digest)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	var log strings.Builder
	sc := bufio.NewScanner(out)
	var id string
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if v, ok := strings.CutPrefix(sc.Text(), "CLAIMED "); ok {
			id = v
			break
		}
	}
	if id == "" {
		t.Fatalf("the child runtime never held its claim:\n%s", log.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	ctx := context.Background()
	b, err := kubesandbox.New(n.c.Config(), n.ns)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := b.List(ctx, sandbox.Filter{Owner: spec.Owner})
	if err != nil || len(listed) != 1 || listed[0].ID != id || listed[0].State != sandbox.StateRunning {
		t.Fatalf("the new runtime lists %+v (%v), want sandbox %s of %s", listed, err, id, spec.Owner)
	}
	again, err := b.Create(ctx, spec)
	if err != nil || again.ID != id {
		t.Fatalf("a claim for the same owner: %+v %v, want sandbox %s again", again, err, id)
	}
	var buf bytes.Buffer
	if st, err := again.Exec(ctx, runner.ExecRequest{Argv: []string{"echo", "still here"}}, &buf, nil); err != nil || st.ExitCode != 0 || buf.String() != "still here\n" {
		t.Fatalf("exec after the restart: %+v %v %q", st, err, buf.String())
	}
	if err := b.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName(spec.Owner))
	gone(t, n, sandboxesGVR, id)
	gone(t, n, podsGVR, id)
}

// killedChild is the runtime TestKillMidClaim kills: it claims a sandbox,
// says so, and waits.
func killedChild(t *testing.T) {
	cfg, _, err := kubeconfig.Load(os.Getenv("KUBE_CHILD_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubesandbox.New(cfg, os.Getenv("KUBE_CHILD_NS"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Create(context.Background(), sandbox.Spec{Pool: os.Getenv("KUBE_CHILD_POOL"), Generation: os.Getenv("KUBE_CHILD_GEN"),
		Owner: os.Getenv("KUBE_CHILD_OWNER"), Runner: sandbox.RunnerBinary{Digest: os.Getenv("KUBE_CHILD_RUNNER")}})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("CLAIMED " + s.ID + "\n")
	select {}
}
