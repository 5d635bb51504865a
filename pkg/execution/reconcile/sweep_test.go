package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// brokerOf is the runtime's credential broker as the reconciler sees it.
type brokerOf struct{ b *runtime.Broker }

func (c brokerOf) Live() []Credential {
	var out []Credential
	for _, l := range c.b.Live() {
		out = append(out, Credential{Fingerprint: l.Fingerprint, RunID: l.RunID, ExpiresAt: l.ExpiresAt})
	}
	return out
}

func (c brokerOf) Revoke(fp string) { c.b.Revoke(fp) }

func newReconciler(t *testing.T, w *world, warm map[string]map[string]bool, broker *runtime.Broker, log *syncBuffer, mod func(*Config)) *Reconciler {
	t.Helper()
	c := Config{Backend: w.backend, Runs: w.store, Records: w.records, Owner: "test-host/127.0.0.1:7070",
		Warm:  func() (map[string]map[string]bool, bool) { return warm, warm != nil },
		Grace: 300 * time.Millisecond, StuckAfter: 300 * time.Millisecond, ActionTimeout: 20 * time.Second}
	if broker != nil {
		c.Credentials = brokerOf{broker}
	}
	if log != nil {
		c.Logger = slog.New(slog.NewJSONHandler(log, nil))
	}
	if mod != nil {
		mod(&c)
	}
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSweepersCleanPlantedLeaks plants one leak of every sweeper among live
// sandboxes and credentials (real bubblewrap sandboxes, a real runs.db) and
// checks that passes clean every leak, touch no live one, record each
// action, and that a further pass finds nothing to do.
func TestSweepersCleanPlantedLeaks(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const pool = "agents"

	// live: a claimed sandbox of an open run, and a warm member of the
	// warm generation
	live := w.create(t, pool, "g-new", "r-live")
	w.run(t, "r-live", pool, live.ID, 1, runmanifest.StatusGranted)
	warmLive := w.create(t, pool, "g-new", sandbox.OwnerWarm)

	// leaks
	noLease := w.create(t, pool, "g-new", "r-ghost") // its worker died before recording the run
	terminal := w.create(t, pool, "g-new", "r-done")
	w.run(t, "r-done", pool, terminal.ID, 1, runmanifest.StatusReleased)
	fenced := w.create(t, pool, "g-new", "r-moved") // attempt 1's sandbox; the run is on attempt 2's
	current := w.create(t, pool, "g-new", "r-moved")
	w.run(t, "r-moved", pool, current.ID, 2, runmanifest.StatusRunning)
	dead := w.create(t, pool, "g-new", "r-live2")
	w.run(t, "r-live2", pool, dead.ID, 1, runmanifest.StatusRunning)
	w.kill(t, dead.ID)
	warmOld := w.create(t, pool, "g-old", sandbox.OwnerWarm)
	stuck := w.create(t, pool, "g-new", ownerRetiring) // the warm loop took it to delete it, and its delete failed
	// an interrupted deletion: a sandbox folder renamed and never removed
	trash := filepath.Join(w.dir, "sandboxes", "sandboxes", ".deleting-sb-00000000deadbeef")
	if err := os.MkdirAll(filepath.Join(trash, "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(trash, "workspace", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	// credentials: the live run's current one stays; one of a final run,
	// one of no run, and attempt 1's of a moved run are revoked
	broker, err := runtime.NewBroker(runtime.LocalIssuer, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	liveTok, liveRc, _ := broker.Issue("r-live", "vault://kv/a#1")
	if err := w.store.Update(ctx, "r-live", func(m *runmanifest.Manifest) error {
		m.CredentialIssuances = []runmanifest.Receipt{liveRc}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	doneTok, _, _ := broker.Issue("r-done", "vault://kv/a#1")
	ghostTok, _, _ := broker.Issue("r-ghost", "vault://kv/a#1")
	oldTok, _, _ := broker.Issue("r-moved", "vault://kv/a#1")
	_, newRc, _ := broker.Issue("r-moved", "vault://kv/a#1")
	if err := w.store.Update(ctx, "r-moved", func(m *runmanifest.Manifest) error {
		m.CredentialIssuances = []runmanifest.Receipt{newRc}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	warm := map[string]map[string]bool{pool: {"g-new": true}}
	var deletedMu sync.Mutex
	deleted := map[string]bool{}
	r := newReconciler(t, w, warm, broker, nil, func(c *Config) {
		c.Deleted = func(id string) { deletedMu.Lock(); deleted[id] = true; deletedMu.Unlock() }
	})

	// Pass 1: what needs no grace goes at once; running sandboxes whose
	// lease is not recorded, and the credential of no run, wait.
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pass 1: %+v", rep)
	have := w.sandboxes(t)
	for _, s := range []*sandbox.Sandbox{terminal, dead, warmOld} {
		if have[s.ID] != nil {
			t.Errorf("pass 1 left %s", s.ID)
		}
		gone(t, w, s.ID)
		deletedMu.Lock()
		if !deleted[s.ID] {
			t.Errorf("pass 1 deleted %s without telling Config.Deleted", s.ID)
		}
		deletedMu.Unlock()
	}
	for _, s := range []*sandbox.Sandbox{noLease, fenced, stuck} {
		if have[s.ID] == nil {
			t.Errorf("pass 1 deleted %s before its grace", s.ID)
		}
	}
	if rep.Pending == 0 {
		t.Errorf("pass 1: no candidate pending its grace: %+v", rep)
	}
	if broker.Valid(string(doneTok)) {
		t.Error("the credential of the released run r-done is still valid after pass 1")
	}
	if !broker.Valid(string(ghostTok)) {
		t.Error("the credential of the unrecorded run was revoked before its grace")
	}

	time.Sleep(400 * time.Millisecond)
	rep, err = r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pass 2: %+v", rep)
	have = w.sandboxes(t)
	for _, s := range []*sandbox.Sandbox{noLease, fenced, stuck} {
		if have[s.ID] != nil {
			t.Errorf("pass 2 left %s (owner %s)", s.ID, have[s.ID].Owner)
		}
		gone(t, w, s.ID)
	}
	if _, err := os.Stat(trash); !os.IsNotExist(err) {
		t.Errorf("the interrupted deletion %s is still there: %v", trash, err)
	}
	for _, tok := range [][]byte{ghostTok, oldTok} {
		if broker.Valid(string(tok)) {
			t.Error("a credential that outlived its run is still valid after pass 2")
		}
	}
	// nothing live touched
	for _, s := range []*sandbox.Sandbox{live, warmLive, current} {
		alive(t, w, s)
		if have[s.ID].Owner != s.Owner {
			t.Errorf("live sandbox %s: owner %q, want %q", s.ID, have[s.ID].Owner, s.Owner)
		}
	}
	if !broker.Valid(string(liveTok)) {
		t.Error("the live run's credential was revoked")
	}

	// every action recorded, with the lease version it saw
	recs := recordsOf(t, w.records)
	kinds := map[string]string{}
	for _, rec := range recs {
		if rec.State == StateDone {
			kinds[rec.Kind] = rec.LeaseVersion
		}
		if rec.Open() {
			t.Errorf("open record after pass 2: %+v", rec)
		}
		if rec.Owner != "test-host/127.0.0.1:7070" {
			t.Errorf("record owner %q", rec.Owner)
		}
	}
	for _, k := range []string{KindNoLease, KindLeaseTerminal, KindFenced, KindDead, KindWarmInactive, KindStuckStopping, KindCredential} {
		if _, ok := kinds[k]; !ok {
			t.Errorf("no done record of kind %s: %+v", k, recs)
		}
	}
	if kinds[KindLeaseTerminal] != "r-done@1" || kinds[KindFenced] != "r-moved@2" || kinds[KindWarmInactive] != "warm@g-old" {
		t.Errorf("lease versions: %v", kinds)
	}

	// Idempotent: a third pass finds nothing and records nothing.
	rep, err = r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Found) != 0 || rep.Cleaned+rep.Kept+rep.Unknown+rep.Pending != 0 || rep.Live != 3 {
		t.Errorf("pass 3 (nothing to do): %+v", rep)
	}
	if n := len(recordsOf(t, w.records)); n != len(recs) {
		t.Errorf("pass 3 wrote %d records, want none", n-len(recs))
	}
	for _, s := range []*sandbox.Sandbox{live, warmLive, current} {
		alive(t, w, s)
	}
}

// TestWarmUnknownKeepsWarmMembers: with no desired state known (before the
// first sync) no warm member is swept, whatever its generation.
func TestWarmUnknownKeepsWarmMembers(t *testing.T) {
	w := newWorld(t)
	s := w.create(t, "agents", "g-any", sandbox.OwnerWarm)
	r := newReconciler(t, w, nil, nil, nil, nil)
	rep, err := r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Found) != 0 || rep.Live != 1 {
		t.Errorf("pass: %+v", rep)
	}
	alive(t, w, s)
}

// TestFenceKeepsSandboxClaimedBetweenReadAndAct: a warm member of an
// inactive generation is taken by a claim after the pass read it and
// before its action, and a sandbox of an unrecorded run is adopted by
// another owner: the owner compare-and-swap fails, the sandboxes are kept
// (running, their new owners'), and the records say why. A third's run is
// recorded between the read and the act: the re-read keeps it.
func TestFenceKeepsSandboxClaimedBetweenReadAndAct(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	old := w.create(t, "agents", "g-old", sandbox.OwnerWarm)
	ghost := w.create(t, "agents", "g-new", "r-ghost")
	late := w.create(t, "agents", "g-new", "r-late") // its claim records the run late
	r := newReconciler(t, w, map[string]map[string]bool{"agents": {"g-new": true}}, nil, nil, func(c *Config) { c.Grace = time.Nanosecond })
	r.beforeAct = func(c *candidate) {
		switch c.resource {
		case old.ID: // a claim takes it (the runtime's warm take)
			if _, err := w.backend.SetOwner(ctx, old.ID, sandbox.OwnerWarm, "r-claim"); err != nil {
				t.Error(err)
			}
		case ghost.ID: // the run is adopted by a new owner
			if _, err := w.backend.SetOwner(ctx, ghost.ID, "r-ghost", "r-adopter"); err != nil {
				t.Error(err)
			}
		case late.ID: // the run is recorded: the re-read sees it
			w.run(t, "r-late", "agents", late.ID, 1, runmanifest.StatusGranted)
		}
	}
	if _, err := r.Pass(ctx); err != nil { // the ghost waits out its (tiny) grace
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	have := w.sandboxes(t)
	alive(t, w, old)
	alive(t, w, ghost)
	alive(t, w, late)
	if have[old.ID].Owner != "r-claim" || have[ghost.ID].Owner != "r-adopter" {
		t.Errorf("owners: %s %s", have[old.ID].Owner, have[ghost.ID].Owner)
	}
	kept := 0
	for _, rec := range recordsOf(t, w.records) {
		if rec.State == StateKept && strings.Contains(rec.Outcome, "fence") {
			kept++
		}
	}
	reread := 0
	for _, rec := range recordsOf(t, w.records) {
		if rec.State == StateKept && rec.Resource == late.ID && strings.Contains(rec.Outcome, "recorded now") {
			reread++
		}
	}
	if kept != 2 || reread != 1 {
		t.Errorf("kept records: %d by the fence (want 2), %d by the re-read (want 1): %+v", kept, reread, recordsOf(t, w.records))
	}
}

// TestHeldProofClaimKept: a proof claim's sandbox has no run manifest; while
// the runtime holds the proof (Held) it is never a candidate, past any
// grace; once the runtime no longer holds it, it is a leak like any other.
func TestHeldProofClaimKept(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	s := w.create(t, "agents", "g-new", "proof-ro-1-0123abcd")
	var held atomic.Bool
	held.Store(true)
	r := newReconciler(t, w, nil, nil, nil, func(c *Config) {
		c.Grace = time.Nanosecond
		c.Held = func(owner string) bool { return held.Load() && owner == s.Owner }
	})
	for range 2 {
		rep, err := r.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Found) != 0 || rep.Live != 1 {
			t.Fatalf("a held proof claim was a candidate: %+v", rep)
		}
		time.Sleep(time.Millisecond)
	}
	alive(t, w, s)
	held.Store(false)
	for range 2 {
		if _, err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	gone(t, w, s.ID)
}

// TestStoppedPassLeavesTheRestPending: a pass whose context ends mid-way
// (its reconciler lost the Lease, or its process is stopping) records the
// action under way as unknown (it was issued; its outcome is not known)
// and attempts none of the rest: their records stay pending with no
// attempt, their sandboxes untouched, and the next leader's passes clean
// them. Before, every remaining candidate was "attempted" with the ended
// context and recorded unknown, context canceled, though nothing was done.
func TestStoppedPassLeavesTheRestPending(t *testing.T) {
	w := newWorld(t)
	var ghosts []*sandbox.Sandbox
	for i := range 3 {
		ghosts = append(ghosts, w.create(t, "agents", "g-1", fmt.Sprintf("r-ghost-%d", i)))
	}
	warm := map[string]map[string]bool{"agents": {"g-1": true}}
	ctx, stop := context.WithCancel(context.Background())
	var acted []string
	log := &syncBuffer{}
	// its deletes hang (a fault the local backend cannot cause for real):
	// the Lease is lost while the first one waits
	first := newReconciler(t, w, warm, nil, log, func(c *Config) {
		c.Grace, c.Workers, c.Owner, c.Failpoint = time.Nanosecond, 1, "leader-1", FailpointDeleteHang
	})
	first.beforeAct = func(c *candidate) { acted = append(acted, c.resource) }
	if _, err := first.Pass(context.Background()); err != nil { // pending: the grace
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = first.Pass(ctx) }()
	for !strings.Contains(log.String(), "failpoint reached") {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if len(acted) != 1 {
		t.Fatalf("the stopped pass began %d actions (%v); want 1", len(acted), acted)
	}
	pending, unknown := 0, 0
	for _, rec := range recordsOf(t, w.records) {
		switch {
		case rec.Resource == acted[0]:
			if rec.State != StateUnknown || rec.Attempts != 1 {
				t.Errorf("the interrupted action's record: %+v; want unknown after 1 attempt", rec)
			}
			unknown++
		case rec.State == StatePending && rec.Attempts == 0:
			pending++
		default:
			t.Errorf("a candidate the stopped pass did not reach: %+v; want pending, no attempt", rec)
		}
	}
	if pending != 2 || unknown != 1 {
		t.Fatalf("records: %d pending, %d unknown; want 2 and 1: %+v", pending, unknown, recordsOf(t, w.records))
	}
	for _, g := range ghosts {
		if g.ID != acted[0] {
			alive(t, w, g)
		}
	}
	// The next leader finishes.
	next := newReconciler(t, w, warm, nil, nil, func(c *Config) { c.Grace, c.Owner = time.Nanosecond, "leader-2" })
	for range 3 {
		if _, err := next.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for _, g := range ghosts {
		gone(t, w, g.ID)
	}
	for _, rec := range recordsOf(t, w.records) {
		if rec.Open() || rec.Owner != "leader-2" {
			t.Errorf("after the next leader's passes: %+v; want closed by leader-2", rec)
		}
	}
}
