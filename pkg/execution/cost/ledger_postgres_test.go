package cost

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// pgLedger opens a writer of the ledger in dsn on clock c that marks
// itself alive only when it commits (AliveEvery an hour), dead to the
// others 30 s after its last mark.
func pgLedger(t *testing.T, dsn, writer string, c *clock) *Ledger {
	t.Helper()
	l, err := OpenLedgerPostgres(context.Background(), dsn, Writer(writer), withClock(c.now), AliveEvery(time.Hour), DeadAfter(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func flush(t *testing.T, ls ...*Ledger) {
	t.Helper()
	for _, l := range ls {
		if err := l.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresReportsAsTheFile: the fixture's events written into
// PostgreSQL read back as the very reports the file gives (pool reports
// over two windows and two price tables, and both runs' terms).
func TestPostgresReportsAsTheFile(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.New(t)
	l := pgLedger(t, dsn, "rt-a", &clock{at: t0})
	fixtureEvents(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := Open(ctx, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	pg, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for _, p := range []string{"{warm: 0.5, active: 2, storage: 0.1}", "{active: 2}"} {
		for _, w := range []Window{{Since: min_(0), Until: min_(120)}, {Since: min_(45), Until: min_(75)}} {
			want, err := file.Pool(ctx, "agents", w, prices(t, p))
			if err != nil {
				t.Fatal(err)
			}
			got, err := pg.Pool(ctx, "agents", w, prices(t, p))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pool report %s, %v:\npostgres %+v\nfile     %+v", p, w, got, want)
			}
		}
	}
	for _, run := range []string{"r-1", "r-2"} {
		want, err := file.Run(ctx, run, prices(t, "{warm: 0.5, active: 2, storage: 0.1}"), nil, min_(200))
		if err != nil {
			t.Fatal(err)
		}
		got, err := pg.Run(ctx, run, prices(t, "{warm: 0.5, active: 2, storage: 0.1}"), nil, min_(200))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("run %s:\npostgres %+v\nfile     %+v", run, got, want)
		}
	}
	if _, err := pg.Run(ctx, "r-nope", nil, nil, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a run without intervals: %v", err)
	}
}

// TestPostgresReplicas: two replicas write one ledger. The leader samples
// the cluster (w1, w2 warm), the other records its own release (c1). The
// leader is killed (its Ledger abandoned, never closed); a third replica
// starts while the second lives: the dead writer's intervals end at an
// unknown time bounded by its last alive mark, the live writer's stay
// open. The new replica observes w1 as the cluster says it still is: the
// interval is reopened, not counted twice, and it keeps it. The second
// replica dies too: the third, without restarting, closes its interval.
func TestPostgresReplicas(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.New(t)
	c := &clock{at: t0}
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a, b := pgLedger(t, dsn, "rt-a", c), pgLedger(t, dsn, "rt-b", c)
	t.Cleanup(func() { a.Close(); b.Close() }) // abandoned below, as a kill leaves them

	w1 := Entry{SandboxID: "w1", Pool: "agents", Generation: "g-1", State: WarmIdle, At: sec(-60)}
	a.Observe(w1)
	b.Observe(Entry{SandboxID: "c1", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-2", At: sec(0)})
	b.Leave("c1", sec(10))
	c.set(sec(10))
	a.Observe(Entry{SandboxID: "w2", Pool: "agents", Generation: "g-1", State: WarmIdle, At: sec(0)})
	flush(t, a, b) // a's last alive mark: 10 s (each commit marks its writer alive)
	kill(a)
	c.set(sec(100))
	b.Observe(Entry{SandboxID: "w3", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-3", At: sec(50)})
	flush(t, b) // b lives: alive at 100 s

	n := pgLedger(t, dsn, "rt-c", c) // 90 s after a's mark, 0 s after b's
	defer n.Close()
	if n.Recovered() != 2 {
		t.Errorf("the new replica recovered %d intervals, want a's 2", n.Recovered())
	}
	recs, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()
	report := func(until time.Time) map[State]StateTime {
		t.Helper()
		rep, err := recs.Pool(ctx, "agents", Window{Since: sec(-60), Until: until}, nil)
		if err != nil {
			t.Fatal(err)
		}
		by := map[State]StateTime{}
		for _, s := range rep.States {
			by[s.State] = s
		}
		return by
	}
	by := report(sec(100))
	// warm: w1 -60..10 and w2 0..10 known, each up to 90 s more; active:
	// c1 0..10 (b's release), w3 50..100 open (b's, alive)
	if w := by[WarmIdle]; w.Intervals != 2 || w.Open != 0 || w.UnknownEnd != 2 || w.Seconds != 80 || w.UnknownSeconds != 180 {
		t.Errorf("warm idle after a died: %+v, want 2 intervals ended unknown, 80 s known and 180 s uncertain", w)
	}
	if act := by[Active]; act.Intervals != 2 || act.Open != 1 || act.UnknownEnd != 0 || act.Seconds != 60 {
		t.Errorf("active after a died: %+v, want c1's 10 s and w3's 50 s open", act)
	}

	n.Observe(w1) // the new sampler: w1 warm since -60 s, still
	flush(t, n)
	by = report(sec(100))
	if w := by[WarmIdle]; w.Intervals != 2 || w.Open != 1 || w.UnknownEnd != 1 || w.Seconds != 170 {
		t.Errorf("warm idle once w1 is observed again: %+v, want w1 reopened (160 s) beside w2's 10 s", w)
	}
	owners := writersOf(t, recs)
	if owners["w1"] != "rt-c" || owners["w3"] != "rt-b" || owners["w2"] != "" {
		t.Errorf("open intervals' writers %v, want w1 rt-c's and w3 rt-b's", owners)
	}

	// b dies: its mark stays at 100 s; the live replica closes w3 on its
	// next alive tick, never its own w1
	kill(b)
	c.set(sec(200))
	n.Observe(w1) // the cluster says it again: a commit, which marks n alive at 200 s
	flush(t, n)   // (a Flush with nothing queued waits for no commit)
	if k, err := n.recoverDead(ctx, false); err != nil || k != 1 {
		t.Fatalf("the live replica's sweep closed %d intervals (%v), want b's 1", k, err)
	}
	by = report(sec(200))
	if act := by[Active]; act.Open != 0 || act.UnknownEnd != 1 || act.Seconds != 60 || act.UnknownSeconds != 100 {
		t.Errorf("active after b died: %+v, want w3 ended unknown after 50 s known, up to 100 s more", act)
	}
	if w := by[WarmIdle]; w.Open != 1 {
		t.Errorf("warm idle after b died: %+v, want w1 still open", w)
	}
	if k, err := n.recoverDead(ctx, false); err != nil || k != 0 {
		t.Errorf("a second sweep closed %d (%v)", k, err)
	}

	// LeaveAll ends the writer's own intervals only: a replica that
	// stops says nothing of another's
	d := pgLedger(t, dsn, "rt-d", c)
	defer d.Close()
	d.Observe(Entry{SandboxID: "w4", Pool: "agents", Generation: "g-1", State: WarmIdle, At: sec(150)})
	if err := d.LeaveAll(ctx, sec(210)); err != nil {
		t.Fatal(err)
	}
	if owners := writersOf(t, recs); len(owners) != 1 || owners["w1"] != "rt-c" {
		t.Errorf("open intervals after rt-d's LeaveAll: %v, want rt-c's w1 only", owners)
	}
}

// kill cuts l's connections, as the kill of its process does, then waits
// for its writer to end: a commit it had begun ends (at the clock's time
// then), its last one fails, and nothing more of it (no alive mark
// either) reaches the database.
func kill(l *Ledger) {
	l.w.Close()
	_ = l.Close() // fails: the connections are gone
}

// writersOf is the writer of each open interval, by sandbox.
func writersOf(t *testing.T, r *Records) map[string]string {
	t.Helper()
	rows, err := r.db.Query(`SELECT sandbox_id, writer FROM intervals WHERE end_ns IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var sb, w string
		if err := rows.Scan(&sb, &w); err != nil {
			t.Fatal(err)
		}
		out[sb] = w
	}
	return out
}

// TestPostgresWritersAtOnce: two replicas observe the same 200 sandboxes
// at the same time (each its own sampler, or a Lease changing hands): each
// sandbox has one interval, once, however their commits interleave.
func TestPostgresWritersAtOnce(t *testing.T) {
	dsn := pgtest.New(t)
	c := &clock{at: t0}
	a, b := pgLedger(t, dsn, "rt-a", c), pgLedger(t, dsn, "rt-b", c)
	defer a.Close()
	defer b.Close()
	var wg sync.WaitGroup
	for _, l := range []*Ledger{a, b} {
		wg.Go(func() {
			for i := range 200 {
				l.Observe(Entry{SandboxID: fmt.Sprintf("s-%03d", i), Pool: "agents", Generation: "g-1", State: WarmIdle, At: t0.Add(time.Duration(i) * time.Second)})
				if i%20 == 0 {
					_ = l.Flush(context.Background())
				}
			}
		})
	}
	wg.Wait()
	flush(t, a, b)
	var n, open, sandboxes int
	if err := a.w.QueryRow(`SELECT count(*), count(*) FILTER (WHERE end_ns IS NULL), count(DISTINCT sandbox_id) FROM intervals`).Scan(&n, &open, &sandboxes); err != nil {
		t.Fatal(err)
	}
	if n != 200 || open != 200 || sandboxes != 200 {
		t.Errorf("%d intervals, %d open, of %d sandboxes; want 200 of each", n, open, sandboxes)
	}
}

// TestPostgresBadInput: a connection string pgx cannot read is refused
// without repeating its password; a database without a ledger is not
// found; one of another schema version is refused, naming the database.
func TestPostgresBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := OpenLedgerPostgres(ctx, "postgres://u:s3cret@host:notaport/db"); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad DSN: %v", err)
	}
	dsn := pgtest.New(t)
	if _, err := OpenPostgres(ctx, dsn); !errors.Is(err, ErrNotFound) {
		t.Errorf("no ledger: %v", err)
	}
	l := pgLedger(t, dsn, "rt-a", &clock{at: t0})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.Exec(`UPDATE cost_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := OpenLedgerPostgres(ctx, dsn); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("another schema version: %v", err)
	}
	if _, err := OpenPostgres(ctx, dsn); !errors.Is(err, ErrInvalid) {
		t.Errorf("another schema version, reading: %v", err)
	}
}
