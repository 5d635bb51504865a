package reconcile

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// recordStores opens the records in each store: a SQLite file, and a
// new PostgreSQL database.
var recordStores = map[string]func(t *testing.T) *Records{
	"sqlite": func(t *testing.T) *Records {
		rs, err := OpenRecords(context.Background(), filepath.Join(t.TempDir(), RecordsFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return rs
	},
	"postgres": func(t *testing.T) *Records {
		rs, err := OpenRecordsPostgres(context.Background(), pgtest.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return rs
	},
}

// TestRecordsLifecycle: an unknown record is one row per resource whose
// attempts add up and whose deadline stays; success resolves it; pruning
// drops old closed records and never an open one. The same in both stores.
func TestRecordsLifecycle(t *testing.T) {
	for name, open := range recordStores {
		t.Run(name, func(t *testing.T) { recordsLifecycle(t, open(t)) })
	}
}

func recordsLifecycle(t *testing.T, rs *Records) {
	ctx := context.Background()
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

// Two runtime replicas on one PostgreSQL: the records a leader left
// unknown are the next leader's to carry on (its attempts add to them and
// its success resolves them), and two replicas opening a new database at
// once create its schema once.
func TestRecordsSharedInPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.New(t)
	opened := make(chan *Records, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			rs, err := OpenRecordsPostgres(ctx, dsn)
			errs <- err
			opened <- rs
		}()
	}
	var replicas []*Records
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("two replicas opening one new database: %v", err)
		}
		rs := <-opened
		t.Cleanup(func() { rs.Close() })
		replicas = append(replicas, rs)
	}
	a, b := replicas[0], replicas[1]
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	failed := entry{Record: Record{Kind: KindDead, Resource: "sb-7", Pool: "agents", Action: ActionDelete, State: StateUnknown,
		Owner: "runtime-a", LastError: "the API server timed out", Deadline: t0.Add(10 * time.Minute), First: t0, Updated: t0}, attempted: true}
	if err := a.write(ctx, []entry{failed}); err != nil {
		t.Fatal(err)
	}
	open, err := b.Open(ctx)
	if err != nil || len(open) != 1 || open[0].Owner != "runtime-a" || open[0].State != StateUnknown {
		t.Fatalf("the next leader's view of the open records: %+v %v", open, err)
	}
	if u, err := b.Unknown(ctx); err != nil || u["agents"] != 1 {
		t.Fatalf("unknown by pool: %v %v", u, err)
	}
	done := failed
	done.State, done.Owner, done.LastError, done.Deadline, done.Updated = StateDone, "runtime-b", "", time.Time{}, t0.Add(time.Minute)
	if err := b.write(ctx, []entry{done}); err != nil {
		t.Fatal(err)
	}
	recent, err := a.Recent(ctx, 5)
	if err != nil || len(recent) != 1 || recent[0].State != StateResolved || recent[0].Attempts != 2 || recent[0].Owner != "runtime-b" ||
		recent[0].LastError != "the API server timed out" || !recent[0].First.Equal(t0) {
		t.Fatalf("resolved by the next leader: %+v %v", recent, err)
	}
	if open, _ := a.Open(ctx); len(open) != 0 {
		t.Fatalf("still open: %+v", open)
	}
}
