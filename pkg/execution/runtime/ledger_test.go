package runtime_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// TestLedgerRecordsSandboxStates runs real bubblewrap sandboxes through
// every state change the runtime makes: warm members created, one taken by
// a claim (a warm hit), the claim moved to a new sandbox (a cold start of
// the same run), released; another taken by a rollout's proof claim. The
// ledger holds each as an interval of the right state, run and pool.
func TestLedgerRecordsSandboxStates(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	path := filepath.Join(t.TempDir(), cost.StateFile)
	ledger, err := cost.OpenLedger(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 2, g1)
	began := time.Now()
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()), runtime.WithLedger(ledger))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	defer rt.Close()
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 || len(rep.Created) != 2 {
		t.Fatalf("reconcile: %+v", rep)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil || !gr.Warm {
		t.Fatalf("claim: %+v, %v", gr, err)
	}
	moved, err := rt.Move(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Release(ctx, gr.RunID, moved.Token, nil); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Prove(ctx, "agents", runtimeapi.ProofRequest{Generation: g1.ID, Rollout: "ro-cost", Checks: []string{"allocate", "cleanup"}})
	if err != nil || !res.Passed() {
		t.Fatalf("proof: %+v, %v", res, err)
	}
	if err := ledger.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := cost.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()

	rc, err := recs.Run(ctx, gr.RunID, nil, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Attempts != 2 || rc.Open || rc.Pool != "agents" || *rc.Terms[0].Quantity <= 0 || *rc.Terms[1].Quantity <= 0 {
		t.Errorf("run %s: %+v; want two closed sandboxes, active and warm idle time", gr.RunID, rc)
	}
	rep, err := recs.Pool(ctx, "agents", cost.Window{Since: began, Until: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := map[cost.State]cost.StateTime{}
	for _, s := range rep.States {
		st[s.State] = s
	}
	// No Reconcile refilled the pool: the two members' warm idle
	// intervals, each ended when a claim (the run's, the proof's) took it.
	if w := st[cost.WarmIdle]; w.Intervals != 2 || w.Open != 0 || w.Seconds <= 0 {
		t.Errorf("warm idle: %+v; want the 2 members' intervals, both ended by a claim", w)
	}
	if a := st[cost.Active]; a.Intervals != 2 || a.Open != 0 {
		t.Errorf("active: %+v; want the claim's two sandboxes, closed", a)
	}
	if p := st[cost.Proof]; p.Intervals != 1 || p.Open != 0 || p.Seconds <= 0 {
		t.Errorf("proof: %+v; want the proof claim's member, closed", p)
	}
	if rep.WarmHits != 1 || rep.ColdStarts != 1 {
		t.Errorf("warm hits %d, cold starts %d; want the claim's warm hit and its move's cold start", rep.WarmHits, rep.ColdStarts)
	}
}
