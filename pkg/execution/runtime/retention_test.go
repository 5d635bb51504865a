package runtime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// Retention: a checkpoint lives until its pool's restore window closes.
// A released run's checkpoint survives a sweep a minute before the window
// closes, a dry run a minute after it only lists it, the sweep then
// deletes it; a suspended run's head, as old, is kept (the run is open)
// and still resumes with its files.
func TestSweepCheckpointsKeepsTheRestoreWindow(t *testing.T) {
	w := newWarmWorld(t)
	d := w.desired(t, "rev-1", 0, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.RestoreWindow.Duration = time.Hour
	f := newCkptRig(t, d)
	ctx := context.Background()

	a, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, f.rt, a, "echo a > a.txt")
	cpA, err := f.rt.Checkpoint(ctx, a.RunID, runtime.CheckpointRequest{Token: a.Token})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if err := f.rt.Release(ctx, a.RunID, a.Token, &zero); err != nil {
		t.Fatal(err)
	}
	b, err := f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	execOut(t, f.rt, b, "head -c 50000 /dev/urandom > b.bin")
	want := execOut(t, f.rt, b, "sha256sum b.bin")
	cpB, err := f.rt.Suspend(ctx, b.RunID, runtime.CheckpointRequest{Token: b.Token})
	if err != nil {
		t.Fatal(err)
	}
	closes := cpA.Predicate.Created.Add(time.Hour) // A's window; B's closes later

	for _, c := range []struct {
		at     time.Time
		dry    bool
		delete []string
	}{
		{closes.Add(-time.Minute), false, nil},                 // inside A's window: nothing
		{closes.Add(time.Minute), true, []string{cpA.Digest}},  // a dry run lists A
		{closes.Add(time.Minute), false, []string{cpA.Digest}}, // A goes
		{cpB.Predicate.Created.Add(2 * time.Hour), false, nil}, // B's window closed too: an open run's head stays
	} {
		got, err := f.rt.SweepCheckpoints(ctx, c.at, c.dry)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Deleted, c.delete) {
			t.Fatalf("sweep at %v (dry run %v): deleted %v, want %v", c.at.Sub(closes), c.dry, got.Deleted, c.delete)
		}
	}
	left, err := f.cps.Store.List()
	if err != nil || len(left) != 1 || left[0].Digest != cpB.Digest {
		t.Fatalf("checkpoints after the sweeps: %+v, %v; want only %s", left, err, cpB.Digest)
	}
	g, err := f.rt.Resume(ctx, b.RunID, b.Token)
	if err != nil {
		t.Fatal(err)
	}
	if got := execOut(t, f.rt, g, "sha256sum b.bin"); got != want {
		t.Fatalf("b.bin after the sweeps and the resume: %q, want %q", got, want)
	}
}
