package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Kinds of cleanup: one per sweeper.
const (
	// KindNoLease: a sandbox whose owner is no run the store knows (the
	// worker died after creating it, or its claim was never recorded).
	KindNoLease = "sandbox-no-lease"
	// KindLeaseTerminal: a sandbox still leased to a run that is final
	// (completed, failed, released, unknown).
	KindLeaseTerminal = "lease-terminal"
	// KindFenced: a sandbox of an earlier allocation attempt of an open
	// run: the run records another sandbox, and this one's runner still
	// answers (a route to a fenced sandbox).
	KindFenced = "fenced-sandbox"
	// KindDead: a sandbox whose processes are gone; only its deletion is
	// left.
	KindDead = "dead-sandbox"
	// KindWarmInactive: a warm member of a generation the pool no longer
	// keeps warm (neither warming nor active).
	KindWarmInactive = "warm-inactive"
	// KindStuckStopping: a sandbox taken out of its pool to be deleted, or
	// whose deletion began, that is still there after StuckAfter.
	KindStuckStopping = "stuck-stopping"
	// KindCredential: a credential the broker still honours whose run has
	// ended, is absent, or moved to a newer credential.
	KindCredential = "credential"
	// KindUnrecorded: an object of a cluster that Slipway labelled whose
	// controller is gone or that has none, and that no record owns (a
	// Sandbox whose claim or warm pool is gone, a pod whose Sandbox is).
	KindUnrecorded = "unrecorded"
)

// Actions.
const (
	ActionDelete = "delete"
	ActionRevoke = "revoke"
	ActionFinish = "finish-delete"
)

// candidate is one thing a pass found to clean up.
type candidate struct {
	kind, action, resource, pool, runID, lease string
	// grace: how long it must stay a candidate, with the same lease, before
	// the action (0: act now).
	grace time.Duration
	// notBefore, when set, is when the action may be taken.
	notBefore time.Time
	s         *sandbox.Sandbox // sandbox kinds
	fp        string           // credential
	trash     bool             // an interrupted deletion
	obj       *sandbox.Object  // a cluster's object (sandbox.Objects)
	force     bool             // delete obj's pod at once
	// still re-reads the authoritative record just before the action: nil
	// when it is still a candidate with the same lease, else why not.
	still func(ctx context.Context) error
	rec   *Record // its open record, if any
}

// errNotCandidate: the re-read found the resource is no longer a candidate.
var errNotCandidate = errors.New("no longer a candidate")

// Pass makes one level-triggered pass: it reads the backend's sandboxes,
// the run store, the warm generations, the broker's credentials and the
// open cleanup records, finds the orphans, and acts on each (after its
// grace), recording every outcome. It returns what it found and did.
func (r *Reconciler) Pass(ctx context.Context) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.now()
	rep := &Report{Found: map[string]int{}}
	open, err := r.c.Records.Open(ctx)
	if err != nil {
		return rep, err
	}
	openBy := map[string]*Record{} // by resource
	for i := range open {
		openBy[open[i].Resource] = &open[i]
	}
	var (
		cands  []*candidate
		listed map[string]bool
		trash  map[string]time.Time
		errs   []error
	)
	if ob, ok := r.c.Backend.(sandbox.Objects); ok {
		// a cluster: its objects are the authority on what exists
		objs, err := ob.Objects(ctx)
		if err != nil {
			return rep, fmt.Errorf("reconcile: list cluster objects: %w", err)
		}
		cands, listed, errs = r.collectObjects(ctx, objs, openBy, rep)
		trash = map[string]time.Time{}
	} else {
		all, err := r.c.Backend.List(ctx, sandbox.Filter{})
		if err != nil {
			return rep, fmt.Errorf("reconcile: list sandboxes: %w", err)
		}
		cands, listed, trash, errs = r.collect(ctx, all, openBy, rep)
	}

	// Act, a few at a time; the records are written in batches as the
	// outcomes come.
	now := r.now()
	found := map[string]bool{}
	orphans := map[string]int64{}
	out := make(chan entry, 64)
	wrote := make(chan error, 1)
	go func() { wrote <- r.writeAll(ctx, out) }()
	jobs := make(chan *candidate)
	var wg sync.WaitGroup
	var repMu sync.Mutex
	for range r.c.Workers {
		wg.Go(func() {
			for c := range jobs {
				if ctx.Err() != nil {
					// stopping (the Lease lost, the process ending): an
					// action not begun is not attempted; its record stays
					// as it was, for the next pass or the next leader
					continue
				}
				if r.beforeAct != nil {
					r.beforeAct(c)
				}
				e, ok := r.act(ctx, c)
				if !ok {
					continue
				}
				repMu.Lock()
				switch e.State {
				case StateDone, StateResolved:
					rep.Cleaned++
				case StateKept:
					rep.Kept++
				case StateUnknown:
					rep.Unknown++
				}
				repMu.Unlock()
				out <- e
			}
		})
	}
	for _, c := range cands {
		key := c.kind + "/" + c.resource
		found[key] = true
		rep.Found[c.kind]++
		orphans[c.pool]++
		due := c.notBefore
		if c.grace > 0 {
			sn, ok := r.seen[key]
			if !ok || sn.lease != c.lease {
				sn = seen{lease: c.lease, since: now}
				r.seen[key] = sn
			}
			due = sn.since.Add(c.grace)
		}
		if !due.IsZero() {
			if now.Before(due) {
				rep.Pending++
				if rep.NextDue.IsZero() || due.Before(rep.NextDue) {
					rep.NextDue = due
				}
				if c.rec == nil || c.rec.State != StatePending {
					out <- r.entry(c, StatePending, "", "acts after "+due.UTC().Format(time.RFC3339Nano)+" unless its lease is recorded by then", false)
				}
				continue
			}
		}
		if ctx.Err() != nil {
			continue // stopping: see the workers
		}
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	for key := range r.seen {
		if !found[key] {
			delete(r.seen, key)
		}
	}
	r.closeUnfound(open, found, listed, trash, cands, out)
	close(out)
	if err := <-wrote; err != nil {
		errs = append(errs, err)
	}
	r.report(ctx, orphans)
	if _, err := r.c.Records.prune(ctx, start.Add(-r.c.KeepRecords)); err != nil {
		errs = append(errs, err)
	}
	rep.Duration = r.now().Sub(start)
	return rep, errors.Join(errs...)
}

// collect finds this pass's candidates: the backend's sandboxes that are
// orphans (all, counting the live ones in rep), the broker's credentials
// that outlive their run, and the sandboxes a delete left half done. It
// returns them with the ids it listed and the half-deleted ones.
func (r *Reconciler) collect(ctx context.Context, all []*sandbox.Sandbox, openBy map[string]*Record, rep *Report) (cands []*candidate, listed map[string]bool, trash map[string]time.Time, errs []error) {
	get := r.runGetter()
	var warm map[string]map[string]bool
	warmKnown := false
	if r.c.Warm != nil {
		warm, warmKnown = r.c.Warm()
	}
	listed = map[string]bool{}
	for _, s := range all {
		listed[s.ID] = true
		c, err := r.classify(ctx, s, get, warm, warmKnown)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c == nil {
			rep.Live++
			continue
		}
		c.rec = openBy[s.ID]
		if c.rec != nil && c.rec.State == StateUnknown {
			c.kind, c.grace = c.rec.Kind, 0 // a retry: the record's kind, at once
		}
		cands = append(cands, c)
	}
	cc, cerrs := r.collectCredentials(ctx, get, openBy)
	cands, errs = append(cands, cc...), append(errs, cerrs...)
	trash = map[string]time.Time{}
	if in, ok := r.c.Backend.(Interrupted); ok {
		var err error
		if trash, err = in.Interrupted(ctx); err != nil {
			errs = append(errs, err)
		}
		for id, since := range trash {
			c := &candidate{kind: KindStuckStopping, action: ActionFinish, resource: id, lease: "deleting@" + since.UTC().Format(time.RFC3339),
				trash: true, notBefore: since.Add(r.c.StuckAfter)}
			if c.rec = openBy[id]; c.rec != nil && c.rec.State == StateUnknown {
				// an earlier delete that failed half way: its record's kind, at once
				c.kind, c.pool, c.runID, c.notBefore = c.rec.Kind, c.rec.Pool, c.rec.RunID, time.Time{}
			}
			cands = append(cands, c)
		}
	}

	return cands, listed, trash, errs
}

// collectCredentials finds the broker's credentials that outlive their
// run.
func (r *Reconciler) collectCredentials(ctx context.Context, get func(context.Context, string) (*runmanifest.Manifest, error), openBy map[string]*Record) (cands []*candidate, errs []error) {
	if r.c.Credentials == nil {
		return nil, nil
	}
	for _, cr := range r.c.Credentials.Live() {
		c, err := r.classifyCredential(ctx, cr, get)
		if err != nil {
			errs = append(errs, err)
		} else if c != nil {
			c.rec = openBy[cr.Fingerprint]
			cands = append(cands, c)
		}
	}
	return cands, errs
}

// closeUnfound closes the open records whose resource this pass did not
// find: gone (an earlier delete finished late, or another actor removed it)
// or no longer a candidate.
func (r *Reconciler) closeUnfound(open []Record, found, listed map[string]bool, trash map[string]time.Time, cands []*candidate, out chan<- entry) {
	for _, rec := range open {
		if found[rec.Kind+"/"+rec.Resource] {
			continue
		}
		if listed[rec.Resource] && rec.Kind != KindCredential {
			if !isCandidateResource(cands, rec.Resource) {
				out <- entry{Record: closeRecord(rec, StateKept, "no longer a candidate: its lease is live", r.now())}
			}
			continue
		}
		if _, ok := trash[rec.Resource]; ok {
			continue
		}
		state, outcome := StateKept, "gone before any action"
		if rec.State == StateUnknown {
			state, outcome = StateDone, "gone: the earlier attempt finished, or it was removed since" // resolved by write
		}
		out <- entry{Record: closeRecord(rec, state, outcome, r.now())}
	}
}

func isCandidateResource(cands []*candidate, id string) bool {
	for _, c := range cands {
		if c.resource == id {
			return true
		}
	}
	return false
}

func closeRecord(rec Record, state, outcome string, at time.Time) Record {
	rec.State, rec.Outcome, rec.Updated, rec.LastError = state, outcome, at, ""
	return rec
}

// writeAll writes the entries from out in batches until out is closed.
func (r *Reconciler) writeAll(ctx context.Context, out <-chan entry) error {
	var errs []error
	batch := make([]entry, 0, 64)
	flush := func() {
		if err := r.c.Records.write(context.WithoutCancel(ctx), batch); err != nil {
			errs = append(errs, err)
		}
		batch = batch[:0]
	}
	for e := range out {
		batch = append(batch, e)
	drain:
		for len(batch) < cap(batch) {
			select {
			case e, ok := <-out:
				if !ok {
					break drain
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		flush()
	}
	return errors.Join(errs...)
}

// report feeds the metrics: orphans by pool (this pass's candidates) and
// unknown records by pool; pools reported before and now without any get 0.
func (r *Reconciler) report(ctx context.Context, orphans map[string]int64) {
	if r.c.Metrics == nil {
		return
	}
	unknown, err := r.c.Records.Unknown(ctx)
	if err != nil {
		unknown = nil
	}
	for p := range orphans {
		r.pools[p] = true
	}
	for p := range unknown {
		r.pools[p] = true
	}
	for p := range r.pools {
		r.c.Metrics.Orphans(ctx, p, orphans[p])
		r.c.Metrics.CleanupUnknown(ctx, p, unknown[p])
	}
}

// runGetter reads runs from the store once per pass each.
func (r *Reconciler) runGetter() func(ctx context.Context, id string) (*runmanifest.Manifest, error) {
	cache := map[string]*runmanifest.Manifest{}
	return func(ctx context.Context, id string) (*runmanifest.Manifest, error) {
		if m, ok := cache[id]; ok {
			if m == nil {
				return nil, runs.ErrNotFound
			}
			return m, nil
		}
		m, err := r.c.Runs.Get(ctx, id)
		if errors.Is(err, runs.ErrNotFound) {
			cache[id] = nil
		} else if err == nil {
			cache[id] = m
		}
		return m, err
	}
}

// classify says what sandbox s is a candidate of, or nil when its lease is
// live (or it is starting).
func (r *Reconciler) classify(ctx context.Context, s *sandbox.Sandbox, get func(context.Context, string) (*runmanifest.Manifest, error),
	warm map[string]map[string]bool, warmKnown bool) (*candidate, error) {
	if s.State == sandbox.StateStarting {
		return nil, nil // its Create has not returned: nobody could own it yet
	}
	c := &candidate{action: ActionDelete, resource: s.ID, pool: s.Pool, s: s, lease: s.Owner}
	dead := s.State == sandbox.StateDead
	switch {
	case s.Owner == sandbox.OwnerWarm:
		c.lease = "warm@" + s.Generation
		switch {
		case dead:
			c.kind = KindDead
		case warmKnown && !warm[s.Pool][s.Generation]:
			c.kind = KindWarmInactive
			c.still = func(context.Context) error {
				w, ok := r.c.Warm()
				if !ok || w[s.Pool][s.Generation] {
					return fmt.Errorf("%w: generation %s of pool %s is warm again", errNotCandidate, s.Generation, s.Pool)
				}
				return nil
			}
		default:
			return nil, nil
		}
		return c, nil
	case s.Owner == ownerRetiring:
		c.kind, c.grace = KindStuckStopping, r.c.StuckAfter
		return c, nil
	case strings.HasPrefix(s.Owner, ownerReaping):
		c.kind = KindStuckStopping // a reconciler took it and its delete did not finish
		return c, nil
	}
	run := s.Owner
	c.runID = run
	m, err := get(ctx, run)
	switch {
	case errors.Is(err, runs.ErrNotFound), run == "":
		if r.c.Held != nil && r.c.Held(run) && !dead {
			return nil, nil // a proof claim under way: its lease is the runtime's
		}
		c.kind = KindNoLease
		if !dead {
			c.grace = r.c.Grace
		}
		c.still = func(ctx context.Context) error {
			if _, err := r.c.Runs.Get(ctx, run); !errors.Is(err, runs.ErrNotFound) {
				return fmt.Errorf("%w: run %s is recorded now (%v)", errNotCandidate, run, err)
			}
			if r.c.Held != nil && r.c.Held(run) {
				return fmt.Errorf("%w: the runtime holds %s now", errNotCandidate, run)
			}
			return nil
		}
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("reconcile: sandbox %s: run %s: %w", s.ID, run, err)
	}
	c.lease = fmt.Sprintf("%s@%d", run, m.AllocationAttempt)
	switch {
	case m.Status.Final():
		c.kind = KindLeaseTerminal
		return c, nil // a final manifest never opens again
	case m.SandboxID != s.ID:
		c.kind = KindFenced
		if !dead {
			c.grace = r.c.Grace
		}
		attempt := m.AllocationAttempt
		c.still = func(ctx context.Context) error {
			m, err := r.c.Runs.Get(ctx, run)
			if err != nil {
				return fmt.Errorf("%w: run %s: %v", errNotCandidate, run, err)
			}
			if !m.Status.Final() && (m.SandboxID == s.ID || m.AllocationAttempt != attempt) {
				return fmt.Errorf("%w: run %s is at attempt %d on sandbox %s now", errNotCandidate, run, m.AllocationAttempt, m.SandboxID)
			}
			return nil
		}
		return c, nil
	case dead:
		c.kind = KindDead
		return c, nil
	}
	return nil, nil
}

// classifyCredential says whether credential cr outlives its run.
func (r *Reconciler) classifyCredential(ctx context.Context, cr Credential, get func(context.Context, string) (*runmanifest.Manifest, error)) (*candidate, error) {
	c := &candidate{kind: KindCredential, action: ActionRevoke, resource: cr.Fingerprint, runID: cr.RunID, fp: cr.Fingerprint}
	verdict := func(m *runmanifest.Manifest, err error) (grace bool, why string, cand bool, _ error) {
		switch {
		case errors.Is(err, runs.ErrNotFound):
			return true, "its run is not recorded", true, nil
		case err != nil:
			return false, "", false, fmt.Errorf("reconcile: credential of run %s: %w", cr.RunID, err)
		case m.Status.Final():
			return false, "its run is " + string(m.Status), true, nil
		case len(m.CredentialIssuances) > 0 && m.CredentialIssuances[len(m.CredentialIssuances)-1].SHA256Fingerprint != cr.Fingerprint:
			return true, "its run moved to a newer credential", true, nil
		}
		return false, "", false, nil
	}
	m, err := get(ctx, cr.RunID)
	grace, _, cand, err := verdict(m, err)
	if err != nil || !cand {
		return nil, err
	}
	if m != nil {
		c.pool = m.Pool
		c.lease = fmt.Sprintf("%s@%d", cr.RunID, m.AllocationAttempt)
	} else {
		c.lease = cr.RunID
	}
	if grace {
		c.grace = r.c.Grace
	}
	c.still = func(ctx context.Context) error {
		m, err := r.c.Runs.Get(ctx, cr.RunID)
		if _, _, cand, err := verdict(m, err); err != nil || !cand {
			return fmt.Errorf("%w: the credential's run %s holds it (%v)", errNotCandidate, cr.RunID, err)
		}
		return nil
	}
	return c, nil
}
