//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// The runtime on the Kubernetes backend: Reconcile creates nothing (the
// cluster keeps the warm pools); a rollout's proof checks pass on a proof
// claim of the warming generation (labelled a proof, gone after), the
// template's tests run in the pod; a claim on the active generation gets a
// warm member, runs a command, and its run manifest records the cluster,
// namespace, node, node image, runtime class and launch type from the
// objects; release deletes the claim.
func TestRuntimeOnKube(t *testing.T) {
	n := startNode(t, "rt")
	g1 := n.generation(t, nil)
	g2 := n.generationOf(t, g1, n.w.TemplateWithTests(t, []templatemeta.Test{{Name: "shell", Run: []string{"sh", "-c", "echo ok"}}}))
	d := n.desire(t, 1)
	ctx := context.Background()
	be, err := kubesandbox.New(n.c.Config(), n.ns, kubesandbox.WithClusterName("node-test"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	artifacts := t.TempDir()
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(artifacts))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()
	if rep := warm.Reconcile(ctx, d); len(rep.Created)+len(rep.Deleted)+len(rep.Errors) != 0 {
		t.Fatalf("Reconcile on a cluster that keeps the warm pools: %+v", rep)
	}
	// it fetched the warm generations' artifacts instead: the runner is
	// unpacked before any claim, off the claims' path
	if runners, err := os.ReadDir(filepath.Join(artifacts, "runners")); err != nil || len(runners) == 0 {
		t.Fatalf("no runner unpacked by Reconcile: %v %v", runners, err)
	}

	// The network check is left out: the test node's CNI bridge enforces
	// no NetworkPolicy (the render's policy is checked by the API server
	// in package render's tests, not enforced here).
	checks := []string{"allocate", "identity", "template-tests", "workspace-writable", "cleanup"}
	res, err := rt.Prove(ctx, n.pool, runtimeapi.ProofRequest{Generation: g2.ID, Rollout: "ro-kube", Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || len(res.Evidence) != len(checks) {
		t.Fatalf("proofs on the cluster: %+v", res.Evidence)
	}
	if !strings.Contains(res.Evidence[2].Reason, "1 tests passed") {
		t.Errorf("template-tests: %s", res.Evidence[2].Reason)
	}
	if left, _ := be.List(ctx, sandbox.Filter{}); len(left) != 0 {
		t.Errorf("claims left after the proof: %+v", left)
	}

	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if !gr.Warm || gr.Generation != g1.ID {
		t.Fatalf("grant %+v, want a warm member of %s", gr, g1.ID)
	}
	var out bytes.Buffer
	st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", "echo $SLIPWAY_GENERATION"}}, &out, nil)
	if err != nil || st.ExitCode != 0 || strings.TrimSpace(out.String()) != g1.ID {
		t.Fatalf("exec: %+v %v %q", st, err, out.String())
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Cluster != "node-test" || m.Namespace != n.ns || m.NodeID == "" || m.NodeImageID == "" || m.RuntimeClass != "runc" ||
		m.LaunchType != sandbox.LaunchWarm || !m.Warm || m.SandboxID != gr.SandboxID || m.RunnerBinarySHA256 != runnerDigest(t, n) {
		t.Fatalf("manifest %+v", m)
	}
	code := 0
	if err := rt.Release(ctx, gr.RunID, gr.Token, &code); err != nil {
		t.Fatal(err)
	}
	gone(t, n, claimsGVR, kubesandbox.ClaimName(gr.RunID))
	gone(t, n, podsGVR, gr.SandboxID)
}
