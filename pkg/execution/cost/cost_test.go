package cost

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func min_(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

func prices(t *testing.T, class string) *tenancy.Pricing {
	t.Helper()
	p, err := tenancy.ParsePricing("pricing.yaml", []byte("apiVersion: slipway.dev/v1alpha1\nkind: Pricing\ncurrency: credits\nclasses:\n  std: "+class+"\npools: {agents: std}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func get(f *float64) float64 {
	if f == nil {
		return math.NaN()
	}
	return *f
}

// clock is a settable time for a Ledger.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *clock) set(at time.Time) { c.mu.Lock(); c.at = at; c.mu.Unlock() }

// fixture records, in pool agents from t0:
//
//	w1: warm idle 0-30 min, then run r-1 30-90 min (a warm hit); 1 GiB of workspace sampled at 30 and 60 (30 min periods)
//	w2: warm idle 0-60 min, deleted unclaimed
//	c1: run r-2 10-40 min (a cold start)
//	o1: warm idle in pool other 0-60 min (never counted in agents)
func fixture(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), StateFile)
	c := &clock{at: t0}
	l, err := OpenLedger(ctx, path, withClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	fixtureEvents(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// fixtureEvents records fixture's events in l.
func fixtureEvents(l *Ledger) {
	l.Enter(Entry{SandboxID: "w1", Pool: "agents", Generation: "g-1", State: WarmIdle, At: min_(0)})
	l.Enter(Entry{SandboxID: "w2", Pool: "agents", Generation: "g-1", State: WarmIdle, At: min_(0)})
	l.Enter(Entry{SandboxID: "o1", Pool: "other", Generation: "g-9", State: WarmIdle, At: min_(0)})
	l.Enter(Entry{SandboxID: "c1", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-2", At: min_(10)})
	l.Enter(Entry{SandboxID: "w1", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-1", At: min_(30)})
	l.Sample([]Usage{{SandboxID: "w1", Pool: "agents", Generation: "g-1", Bytes: 1 << 30}}, min_(30), 30*time.Minute)
	l.Leave("c1", min_(40))
	l.Leave("w2", min_(60))
	l.Leave("o1", min_(60))
	l.Sample([]Usage{{SandboxID: "w1", Pool: "agents", Generation: "g-1", Bytes: 1 << 30}}, min_(60), 30*time.Minute)
	l.Leave("w1", min_(90))
}

// TestPoolArithmetic checks a pool's report against figures worked out by
// hand from the fixture, at warm 0.5, active 2 per hour and storage 0.1
// per GiB-hour.
func TestPoolArithmetic(t *testing.T) {
	ctx := context.Background()
	r, err := Open(ctx, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Pool(ctx, "agents", Window{Since: min_(0), Until: min_(120)}, prices(t, "{warm: 0.5, active: 2, storage: 0.1}"))
	if err != nil {
		t.Fatal(err)
	}
	st := map[State]StateTime{}
	for _, s := range rep.States {
		st[s.State] = s
	}
	// warm idle: w1 30 min + w2 60 min = 1.5 h at 0.5 = 0.75
	if w := st[WarmIdle]; w.Seconds != 5400 || w.Intervals != 2 || !near(get(w.Cost), 0.75) {
		t.Errorf("warm idle = %+v, want 5400 s in 2 intervals costing 0.75", w)
	}
	// active: w1 60 min + c1 30 min = 1.5 h at 2 = 3
	if a := st[Active]; a.Seconds != 5400 || a.Intervals != 2 || !near(get(a.Cost), 3) {
		t.Errorf("active = %+v, want 5400 s costing 3", a)
	}
	if r := st[Retained]; r.NotApplicable == "" || r.Cost != nil || r.Seconds != 0 {
		t.Errorf("retained = %+v, want not applicable", r)
	}
	// storage: 1 GiB for 30 + 30 min = 1 GiB-hour at 0.1
	if s := rep.Storage; !near(s.GiBHours, 1) || s.Samples != 2 || s.PeakBytes != 1<<30 || !near(get(s.Cost), 0.1) {
		t.Errorf("storage = %+v, want 1 GiB-hour from 2 samples costing 0.1", s)
	}
	if rep.WarmHits != 1 || rep.ColdStarts != 1 || !near(get(rep.WarmHitFraction), 0.5) || rep.UnusedWarmMinutes != 90 {
		t.Errorf("hits %d, cold %d, fraction %v, unused %v; want 1, 1, 0.5, 90", rep.WarmHits, rep.ColdStarts, get(rep.WarmHitFraction), rep.UnusedWarmMinutes)
	}
	if !near(rep.Known, 3.85) || len(rep.Unknown) != 0 || rep.PriceClass != "std" || rep.Currency != "credits" {
		t.Errorf("known %v, unknown %q, class %q; want 3.85 and nothing unknown", rep.Known, rep.Unknown, rep.PriceClass)
	}

	// A window inside: 45-75 min holds w2's last 15 min of warm idle
	// and w1's active 45-75; no allocation began in it.
	rep, err = r.Pool(ctx, "agents", Window{Since: min_(45), Until: min_(75)}, prices(t, "{warm: 0.5, active: 2, storage: 0.1}"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.States[0].Seconds != 900 || rep.States[1].Seconds != 1800 || rep.WarmHitFraction != nil || rep.WarmHits+rep.ColdStarts != 0 {
		t.Errorf("window 45-75: %+v", rep)
	}
	// storage 45-75: 1 GiB for 30 min = 0.5 GiB-hour
	if !near(rep.Storage.GiBHours, 0.5) {
		t.Errorf("storage 45-75 = %v GiB-hours, want 0.5", rep.Storage.GiBHours)
	}

	// Prices left out are unknown, never zero: a class with the active
	// rate only prices active time and names the rest.
	rep, err = r.Pool(ctx, "agents", Window{Since: min_(0), Until: min_(120)}, prices(t, "{active: 2}"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.States[0].Cost != nil || rep.Storage.Cost != nil || !near(rep.Known, 3) || len(rep.Unknown) != 2 ||
		!strings.Contains(rep.Unknown[0], "warm_idle: 1h30m0s at no known price (pricing.yaml's class std has no price for it)") {
		t.Errorf("active-only prices: known %v, unknown %q", rep.Known, rep.Unknown)
	}
	// No price table: nothing is priced.
	rep, err = r.Pool(ctx, "agents", Window{Since: min_(0), Until: min_(120)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Known != 0 || len(rep.Unknown) != 3 || rep.States[1].Cost != nil || !strings.Contains(rep.Unknown[1], "no price table given") {
		t.Errorf("no prices: known %v, unknown %q", rep.Known, rep.Unknown)
	}
	if _, err := r.Pool(ctx, "agents", Window{Since: min_(10), Until: min_(10)}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty window: %v", err)
	}
}

// TestRunArithmetic: r-1 was a warm hit (30 min of warm idle before its
// claim), held w1 for an hour with 1 GiB-hour of workspace; r-2 a cold
// start of 30 min without a storage sample.
func TestRunArithmetic(t *testing.T) {
	ctx := context.Background()
	r, err := Open(ctx, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := prices(t, "{warm: 0.5, active: 2, storage: 0.1}")
	m := &runmanifest.Manifest{Egress: []runmanifest.EgressAttempt{{BytesIn: 1000, BytesOut: 24}, {BytesIn: 0, BytesOut: 0}}}
	rc, err := r.Run(ctx, "r-1", p, m, min_(200))
	if err != nil {
		t.Fatal(err)
	}
	terms := map[string]Term{}
	for _, tm := range rc.Terms {
		terms[tm.Name] = tm
	}
	// 1 h at 2 + 0.5 h at 0.5 + 1 GiB-hour at 0.1 = 2.35
	if !near(get(terms[TermActive].Cost), 2) || !near(get(terms[TermWarmIdle].Cost), 0.25) || !near(get(terms[TermStorage].Cost), 0.1) || !near(rc.Known, 2.35) {
		t.Errorf("r-1: known %v, terms %+v", rc.Known, rc.Terms)
	}
	if e := terms[TermEgress]; get(e.Quantity) != 1024 || e.Cost != nil || e.Why != "pricing.yaml has no network price" {
		t.Errorf("egress = %+v, want 1024 bytes of unknown cost", e)
	}
	if got := strings.Join(rc.Unknown, ","); got != "network egress,model tokens,node overhead" || rc.Attempts != 1 || rc.Open || rc.Pool != "agents" {
		t.Errorf("r-1: unknown %q, attempts %d, open %v, pool %q", got, rc.Attempts, rc.Open, rc.Pool)
	}
	rc, err = r.Run(ctx, "r-2", p, nil, min_(200))
	if err != nil {
		t.Fatal(err)
	}
	terms = map[string]Term{}
	for _, tm := range rc.Terms {
		terms[tm.Name] = tm
	}
	if !near(get(terms[TermActive].Cost), 1) || get(terms[TermWarmIdle].Cost) != 0 || terms[TermStorage].Cost != nil || !near(rc.Known, 1) {
		t.Errorf("r-2: known %v, terms %+v", rc.Known, rc.Terms)
	}
	if got := strings.Join(rc.Unknown, ","); got != "workspace storage,network egress,model tokens,node overhead" {
		t.Errorf("r-2 unknown: %q", got)
	}
	// A manifest with no egress: zero at any price. One that dropped
	// attempts over its bound: the bytes are unknown.
	rc, err = r.Run(ctx, "r-2", p, &runmanifest.Manifest{}, min_(200))
	if err != nil {
		t.Fatal(err)
	}
	if e := rc.Terms[3]; e.Name != TermEgress || get(e.Cost) != 0 || strings.Join(rc.Unknown, ",") != "workspace storage,model tokens,node overhead" {
		t.Errorf("r-2 without egress: %+v, unknown %q", e, rc.Unknown)
	}
	rc, err = r.Run(ctx, "r-2", p, &runmanifest.Manifest{EgressDropped: 3}, min_(200))
	if err != nil {
		t.Fatal(err)
	}
	if e := rc.Terms[3]; e.Quantity != nil || e.Cost != nil || !strings.Contains(e.Why, "dropped 3 egress attempts") {
		t.Errorf("r-2 with dropped egress: %+v", e)
	}
	if _, err := r.Run(ctx, "r-none", p, nil, time.Time{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
}

// TestCrashLeftOpenInterval: a ledger closed without its sandboxes'
// intervals ending (as a killed runtime leaves it) is recovered by the next
// OpenLedger: the interval ends at the last alive mark, flagged unknown,
// with the time to the restart reported as uncertain, not counted and not
// dropped.
func TestCrashLeftOpenInterval(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), StateFile)
	c := &clock{at: t0}
	l, err := OpenLedger(ctx, path, withClock(c.now), AliveEvery(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	l.Enter(Entry{SandboxID: "w1", Pool: "agents", Generation: "g-1", State: WarmIdle, At: t0.Add(time.Second)})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.set(t0.Add(10 * time.Second))
	l.Enter(Entry{SandboxID: "w2", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-1", At: t0.Add(5 * time.Second)})
	if err := l.Flush(ctx); err != nil { // the last alive mark: 10 s
		t.Fatal(err)
	}
	// refused: a gap, not a failed commit
	l.Enter(Entry{SandboxID: "w3", Pool: "agents", State: "napping"})
	// killed: nothing closed w1 or w2
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c.set(t0.Add(100 * time.Second))
	l, err = OpenLedger(ctx, path, withClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	if l.Recovered() != 2 {
		t.Errorf("recovered %d intervals, want 2", l.Recovered())
	}
	l.Close()
	// Opening again recovers nothing more.
	l, err = OpenLedger(ctx, path, withClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	if l.Recovered() != 0 {
		t.Errorf("second open recovered %d", l.Recovered())
	}
	l.Close()
	r, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Pool(ctx, "agents", Window{Since: t0, Until: t0.Add(time.Hour)}, prices(t, "{warm: 36, active: 360}"))
	if err != nil {
		t.Fatal(err)
	}
	w, a := rep.States[0], rep.States[1]
	// w1: known 1-10 s (9 s), uncertain 10-100 s; w2: known 5-10 s, uncertain 10-100 s
	if w.Seconds != 9 || w.UnknownEnd != 1 || w.UnknownSeconds != 90 || w.Open != 0 || !near(get(w.Cost), 0.09) {
		t.Errorf("warm idle = %+v, want 9 s known and 90 s uncertain", w)
	}
	if a.Seconds != 5 || a.UnknownEnd != 1 || a.UnknownSeconds != 90 || !near(get(a.Cost), 0.5) {
		t.Errorf("active = %+v, want 5 s known and 90 s uncertain", a)
	}
	if rep.Gaps != 1 || len(rep.Unknown) != 3 || !strings.Contains(rep.Unknown[0], "1 intervals ended at an unknown time") || !strings.Contains(rep.Unknown[2], "1 events lost") {
		t.Errorf("unknown = %q", rep.Unknown)
	}
	rc, err := r.Run(ctx, "r-1", nil, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rc.Terms[0].Why, "up to 1m30s after") || !strings.Contains(strings.Join(rc.Unknown, ","), "after its runtime was killed") {
		t.Errorf("run after a crash: %+v", rc)
	}
}

// TestTotals: the in-memory time per pool and state, for metrics: closed
// intervals summed, open ones to now.
func TestTotals(t *testing.T) {
	c := &clock{at: t0}
	l, err := OpenLedger(context.Background(), filepath.Join(t.TempDir(), StateFile), withClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	l.Enter(Entry{SandboxID: "w1", Pool: "agents", State: WarmIdle, At: sec(0)})
	l.Enter(Entry{SandboxID: "w1", Pool: "agents", State: Active, RunID: "r-1", At: sec(10)})
	l.Enter(Entry{SandboxID: "w2", Pool: "agents", State: WarmIdle, At: sec(20)})
	l.Leave("w1", sec(40))
	l.Leave("never-entered", sec(41))
	c.set(sec(50))
	got := map[State]float64{}
	for _, s := range l.Totals() {
		if s.Pool != "agents" {
			t.Errorf("pool %q", s.Pool)
		}
		got[s.State] = s.Seconds
	}
	// warm idle: w1 0-10 and w2 20-50 (open); active: w1 10-40
	if len(got) != 2 || got[WarmIdle] != 40 || got[Active] != 30 {
		t.Errorf("totals %v, want warm_idle 40 s and active 30 s", got)
	}
}

// TestObserveAfterRestart: a cluster's sandboxes outlive the runtime. The
// intervals it left open are closed as unknown by the next OpenLedger;
// observing the same sandbox in the same state since the same time (the
// cluster's timestamps) reopens that interval instead of counting its time
// twice, and observing it again changes nothing; a new state ends it.
func TestObserveAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), StateFile)
	c := &clock{at: min_(10)}
	l, err := OpenLedger(ctx, path, withClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	warm := Entry{SandboxID: "sb-1", Pool: "agents", Generation: "g-1", State: WarmIdle, At: min_(0)}
	l.Observe(warm)
	l.Observe(Entry{SandboxID: "sb-2", Pool: "agents", Generation: "g-1", State: Retained, At: min_(5)})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close() // stopped: sb-1 and sb-2 stay open
	c.set(min_(20))
	if l, err = OpenLedger(ctx, path, withClock(c.now)); err != nil {
		t.Fatal(err)
	}
	if l.Recovered() != 2 {
		t.Fatalf("recovered %d", l.Recovered())
	}
	l.Observe(warm) // the cluster says: warm since 0, still
	l.Observe(warm)
	l.Observe(Entry{SandboxID: "sb-1", Pool: "agents", Generation: "g-1", State: Active, RunID: "r-1", At: min_(30)})
	l.Leave("sb-1", min_(40))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Pool(ctx, "agents", Window{Since: min_(0), Until: min_(60)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[State]StateTime{}
	for _, s := range rep.States {
		by[s.State] = s
	}
	// sb-1: warm 0-30 (one interval, reopened), active 30-40; sb-2:
	// retained 5-10 known, then unknown up to 20 (never observed again)
	if w := by[WarmIdle]; w.Intervals != 1 || w.Seconds != 1800 || w.UnknownEnd != 0 {
		t.Errorf("warm idle: %+v, want one interval of 30 min", w)
	}
	if a := by[Active]; a.Intervals != 1 || a.Seconds != 600 {
		t.Errorf("active: %+v", a)
	}
	if rt := by[Retained]; rt.Intervals != 1 || rt.Seconds != 300 || rt.UnknownEnd != 1 || rt.NotApplicable != "" {
		t.Errorf("retained: %+v", rt)
	}
}
