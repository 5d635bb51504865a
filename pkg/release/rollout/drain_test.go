package rollout_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// TestDrainCheckpoint: with onDrainDeadline: checkpoint, a run still open
// on the old generation at the drain deadline is suspended and resumed on
// the new one, through a real rollout on a runtime that keeps checkpoints.
// The commit of the step names the run and its checkpoint; the owner's
// request key adopts the new grant (attempt 2, generation g2); every file
// is as it was (hashes), the machine-id is the new sandbox's own (the
// refresh phase ran after the restore), the manifest names g2 and the
// checkpoint, and question 6 answers that the restore was proved by the
// drain, and that the checkpoint's job event sequence is not known (the
// runtime took it on the rollout's order; only the control plane numbers
// a job's events). Step 5's row (rollout status) says how many runs the
// drain checkpointed and resumed on g2, and which.
func TestDrainCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnvServe(t, func(s *pool.Spec) {
		s.OnDrainDeadline = "checkpoint"
		s.DrainDeadline = pool.Duration{Duration: 2 * time.Second}
	}, func(c *serve.Config) { c.CheckpointSigner = sharedSigner(t) })
	ctx := context.Background()
	claim := runtimeapi.ClaimBody{Tenant: "long-task", RequestKey: "drain-checkpoint-1"}
	var grant *runtimeapi.Grant
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := e.client.Claim(ctx, "agents", claim)
		if err == nil {
			grant = g
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	exec := func(g *runtimeapi.Grant, script string) string {
		t.Helper()
		res, err := e.client.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", "cd /workspace && " + script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v, %v", script, res, err)
		}
		return res.Stdout
	}
	const hashes = `find . -type f | sort | xargs sha256sum; find . -type l | sort`
	exec(grant, `mkdir -p src data && echo 'package main' > src/main.go && head -c 100000 /dev/urandom > data/blob.bin && ln -s src/main.go link`)
	want := exec(grant, hashes)
	machine := exec(grant, "cat /etc/machine-id")

	g2 := e.next(e.g1)
	d := e.driver()
	if _, err := d.Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err := e.driver().Run(ctx)
	if err != nil || r.Status != pool.RolloutSucceeded {
		t.Fatalf("rollout: %+v %v", r, err)
	}
	log := gittest.Git(t, e.repo, "log", "--format=%B", "main")
	m := regexp.MustCompile(`Checkpointed: ` + grant.RunID + ` at (sha256:[0-9a-f]{64}), resumed on ` + g2.ID + ` in sandbox (sb-[0-9a-f]+)`).FindStringSubmatch(log)
	if m == nil || !strings.Contains(log, "drain deadline of "+e.g1.ID+" in pool agents: checkpointed 1 run and resumed 1 on "+g2.ID) {
		t.Fatalf("the drain's commit does not name the run and its checkpoint:\n%s", log)
	}
	digest, sandboxID := m[1], m[2]

	// The owner adopts the new grant with its request key.
	g, err := e.client.Claim(ctx, "agents", claim)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Adopted || g.RunID != grant.RunID || g.Generation != g2.ID || g.AllocationAttempt != 2 || g.SandboxID != sandboxID || g.Token == grant.Token {
		t.Fatalf("the owner's grant after the drain: %+v (before: %+v)", g, grant)
	}
	if got := exec(g, hashes); got != want {
		t.Fatalf("files after the drain:\n%s\nwant:\n%s", got, want)
	}
	if got := exec(g, "cat /etc/machine-id"); got == machine || strings.TrimSpace(got) == "" {
		t.Errorf("machine-id after the drain %q, before %q: want the new sandbox's own", got, machine)
	}
	man, err := e.client.Run(ctx, grant.RunID)
	if err != nil || man.Generation != g2.ID || man.WorkspaceCheckpointID != digest || man.Status.Final() {
		t.Fatalf("manifest after the drain: %+v, %v", man, err)
	}
	dur, err := e.client.Durable(ctx, grant.RunID)
	if err != nil || dur.Head != digest || dur.Suspended || dur.LastRestore == nil || dur.LastRestore.Checkpoint != digest ||
		dur.LastRestore.By != runtimeapi.RestoredByDrain || !dur.HeadEventSeqUnknown || dur.HeadEventSeq != 0 {
		t.Fatalf("durable after the drain: %+v, %v", dur, err)
	}
	zero := 0
	if err := e.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	if man, err := e.client.Run(ctx, grant.RunID); err != nil || man.Status != runmanifest.StatusCompleted {
		t.Errorf("the released run: %+v, %v", man, err)
	}
	if st := e.state(); stateOf(st, e.g1.ID) != pool.Retained {
		t.Errorf("g1 after the rollout: %q", stateOf(st, e.g1.ID))
	}
	if !strings.Contains(gittest.Git(t, e.repo, "log", "--format=%(trailers:key=Slipway-Step,valueonly)", "main"), "drain-checkpoint") {
		t.Errorf("no drain-checkpoint step in the log")
	}
	rec := e.history()[0]
	if s := rec.Steps[4]; s.Phase != rollout.PhaseDrain || s.Result != rollout.StepPassed ||
		s.Evidence != "0 runs open on "+e.g1.ID+"; drain deadline: 1 run checkpointed and resumed on "+g2.ID+" ("+grant.RunID+")" {
		t.Errorf("step 5 of the rollout: %+v", s)
	}
	e.checkRouting()
}

// The runtime's client is the Checkpointer a driver finds in its Fleet.
var _ rollout.Checkpointer = (*runtimeapi.Client)(nil)
