package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

func TestClaimFenceRelease(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 1, g1)
	d.PolicyRevision = "rev-0"
	at := time.Now()
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, at }, warm, store, time.Minute)
	warm.Reconcile(ctx, d)

	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme", SessionID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !gr.Warm || gr.Generation != g1.ID || gr.AllocationAttempt != 1 {
		t.Fatalf("grant %+v", gr)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.RunnerImageDigest != g1.Pins["runner"].Identity() || m.WorkspaceTemplateID != g1.Pins["workspaceTemplate"].Identity() ||
		m.ConfigRevision != "rev-1" || m.SandboxID != gr.SandboxID || m.Tenant != "acme" || !m.Warm || m.Lifecycle.ClaimCreated.IsZero() {
		t.Fatalf("manifest %+v", m)
	}
	// The runner's image and binary are both recorded, apart.
	sbs, err := be.List(ctx, sandbox.Filter{Owner: gr.RunID})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes of %s: %v, %v", gr.RunID, sbs, err)
	}
	if m.RunnerBinarySHA256 != sbs[0].RunnerBinarySHA256 || m.RunnerBinarySHA256 == m.RunnerImageDigest || !strings.HasPrefix(m.RunnerBinarySHA256, "sha256:") {
		t.Fatalf("runner_binary_sha256 %q, sandbox runs %q, runner image %q", m.RunnerBinarySHA256, sbs[0].RunnerBinarySHA256, m.RunnerImageDigest)
	}
	// With no policy pinned, the policy revision is the verified one.
	if m.PolicyRevision != "rev-0" || m.VerificationPolicyRevision != "rev-0" {
		t.Fatalf("policy_revision %q, verification_policy_revision %q, want rev-0", m.PolicyRevision, m.VerificationPolicyRevision)
	}
	for _, q := range []runmanifest.Query{{RunnerImage: m.RunnerImageDigest}, {RunnerBinary: m.RunnerBinarySHA256}, {Policy: "rev-0"}} {
		if ids, err := store.Query(ctx, q); err != nil || len(ids) != 1 || ids[0] != gr.RunID {
			t.Fatalf("Query(%+v) = %v, %v", q, ids, err)
		}
	}
	var out strings.Builder
	if st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"echo", "one"}}, &out, &out); err != nil || st.ExitCode != 0 {
		t.Fatalf("exec: %v %v", st, err)
	}

	// The first sandbox is late: the claim moves; the old token is fenced.
	moved, err := rt.Move(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if moved.AllocationAttempt != 2 || moved.SandboxID == gr.SandboxID || moved.Token == gr.Token {
		t.Fatalf("moved %+v", moved)
	}
	if _, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"echo", "late"}}, &out, &out); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("old token: %v, want ErrFenced", err)
	}
	if err := rt.Release(ctx, gr.RunID, gr.Token, nil); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("release with the old token: %v", err)
	}
	if left, _ := be.List(ctx, sandbox.Filter{Owner: gr.RunID}); len(left) != 1 || left[0].ID != moved.SandboxID {
		t.Fatalf("sandboxes of the claim after the move: %+v", left)
	}
	if st, err := rt.Exec(ctx, gr.RunID, moved.Token, runner.ExecRequest{Argv: []string{"echo", "two"}}, &out, &out); err != nil || st.ExitCode != 0 {
		t.Fatalf("exec with the new token: %v %v", st, err)
	}
	zero := 0
	if err := rt.Release(ctx, gr.RunID, moved.Token, &zero); err != nil {
		t.Fatal(err)
	}
	m, _ = store.Get(ctx, gr.RunID)
	if m.Status != runmanifest.StatusCompleted || m.AllocationAttempt != 2 || m.SandboxID != moved.SandboxID || m.Lifecycle.ResourcesReleased.IsZero() || m.Lifecycle.FirstOutput.IsZero() {
		t.Fatalf("final manifest %+v", m)
	}
	if left, _ := be.List(ctx, sandbox.Filter{Owner: gr.RunID}); len(left) != 0 {
		t.Errorf("sandboxes left after release: %+v", left)
	}
	if ids, _ := store.Query(ctx, runmanifest.Query{Generation: g1.ID}); len(ids) != 1 || ids[0] != gr.RunID {
		t.Errorf("runs of %s: %v", g1.ID, ids)
	}

	// A stale view refuses claims.
	at = time.Now().Add(-time.Hour)
	if _, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"}); !errors.Is(err, runtime.ErrStale) {
		t.Fatalf("stale view: %v", err)
	}
}
