package reconcile

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestRecordsLifecycle: an unknown record is one row per resource whose
// attempts add up and whose deadline stays; success resolves it; pruning
// drops old closed records and never an open one.
func TestRecordsLifecycle(t *testing.T) {
	ctx := context.Background()
	rs, err := OpenRecords(ctx, filepath.Join(t.TempDir(), RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rec := func(res, state string, at time.Time, deadline time.Time) entry {
		return entry{Record: Record{Kind: KindDead, Resource: res, Pool: "agents", Action: ActionDelete, State: state, Owner: "o",
			LastError: map[bool]string{true: "boom"}[state == StateUnknown], Deadline: deadline, First: at, Updated: at}, attempted: true}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rs.write(ctx, []entry{rec("sb-a", StateUnknown, t0, t0.Add(time.Hour)), rec("sb-old", StateDone, t0, time.Time{})}))
	must(rs.write(ctx, []entry{rec("sb-a", StateUnknown, t0.Add(time.Minute), t0.Add(2*time.Hour))}))
	open, err := rs.Open(ctx)
	must(err)
	if len(open) != 1 || open[0].Attempts != 2 || !open[0].Deadline.Equal(t0.Add(time.Hour)) || open[0].LastError != "boom" {
		t.Fatalf("open: %+v", open)
	}
	n, err := rs.prune(ctx, t0.Add(30*24*time.Hour))
	must(err)
	if n != 1 {
		t.Fatalf("pruned %d, want the one closed record", n)
	}
	if open, _ = rs.Open(ctx); len(open) != 1 {
		t.Fatalf("an open record was pruned: %+v", open)
	}
	must(rs.write(ctx, []entry{rec("sb-a", StateDone, t0.Add(2*time.Minute), time.Time{})}))
	recent, err := rs.Recent(ctx, 10)
	must(err)
	if len(recent) != 1 || recent[0].State != StateResolved || recent[0].Attempts != 3 || !recent[0].Deadline.IsZero() || recent[0].LastError != "boom" {
		t.Fatalf("resolved: %+v", recent)
	}
	if u, _ := rs.Unknown(ctx); len(u) != 0 {
		t.Fatalf("unknown after resolution: %v", u)
	}
}
