//go:build linux

package kubesandbox_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Every pod of a generation has the refresh phase's machine id, as every
// local sandbox does: a template test that asserts a fresh machine id (as
// the agent-tools sample's no-build-debris does) passes as a rollout's
// template-tests proof in a pod, and two pods of one warm pool each read
// a different valid machine id, read-only, through the runner.
func TestFreshMachineIDPerPod(t *testing.T) {
	n := startNode(t, "mid")
	g1 := n.generation(t, nil)
	g2 := n.generationOf(t, g1, n.w.TemplateWithTests(t, []templatemeta.Test{
		{Name: "fresh-machine-id", Run: []string{"sh", "-c", "grep -Eq '^[0-9a-f]{32}$' /etc/machine-id"}},
	}))
	d := n.desire(t, 2)
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
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()

	checks := []string{"allocate", "identity", "template-tests", "cleanup"}
	res, err := rt.Prove(ctx, n.pool, runtimeapi.ProofRequest{Generation: g2.ID, Rollout: "ro-mid", Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() || len(res.Evidence) != len(checks) {
		t.Fatalf("proofs on the cluster: %+v", res.Evidence)
	}

	// Two warm members of g1's pool, each with its own machine id.
	ids := map[string]string{}
	for _, tenant := range []string{"t1", "t2"} {
		gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: n.pool, Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		if !gr.Warm || gr.Generation != g1.ID {
			t.Fatalf("grant %+v, want a warm member of %s", gr, g1.ID)
		}
		var out bytes.Buffer
		st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"cat", "/etc/machine-id"}}, &out, nil)
		if err != nil || st.ExitCode != 0 || !shape.ValidMachineID(out.Bytes()) {
			t.Fatalf("%s: cat /etc/machine-id: %+v %v %q", gr.SandboxID, st, err, out.String())
		}
		for pod, id := range ids {
			if id == out.String() {
				t.Fatalf("pods %s and %s share the machine id %q", pod, gr.SandboxID, id)
			}
		}
		ids[gr.SandboxID] = out.String()
		out.Reset()
		st, err = rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", "echo 0123456789abcdef0123456789abcdef > /etc/machine-id"}}, &out, nil)
		if err != nil || st.ExitCode == 0 {
			t.Fatalf("%s: /etc/machine-id is writable: %+v %v %q", gr.SandboxID, st, err, out.String())
		}
		code := 0
		defer func() {
			if err := rt.Release(ctx, gr.RunID, gr.Token, &code); err != nil {
				t.Error(err)
			}
		}()
	}
	if len(ids) != 2 {
		t.Fatalf("machine ids %v: want two pods", ids)
	}
}
