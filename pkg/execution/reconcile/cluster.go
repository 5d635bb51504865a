package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// collectObjects finds this pass's candidates on a cluster backend
// (sandbox.Objects): the objects that are orphans (the others counted
// live in rep), and the broker's credentials that outlive their run. It
// returns them with the objects it listed (by Kind/name).
func (r *Reconciler) collectObjects(ctx context.Context, objs []sandbox.Object, openBy map[string]*Record, rep *Report) (cands []*candidate, listed map[string]bool, errs []error) {
	get := r.runGetter()
	var warm map[string]map[string]bool
	warmKnown := false
	if r.c.Warm != nil {
		warm, warmKnown = r.c.Warm()
	}
	var synced time.Time
	if r.c.Synced != nil {
		synced = r.c.Synced()
	}
	listed = map[string]bool{}
	uids := map[string]string{} // Kind/name -> UID
	for i := range objs {
		listed[objs[i].Ref()] = true
		uids[objs[i].Ref()] = objs[i].UID
	}
	now := r.now()
	for i := range objs {
		o := &objs[i]
		if r.c.Warm != nil {
			if _, ours := warm[o.Pool]; !warmKnown || !ours {
				// a namespace may hold other runtimes' pools: only the
				// pools of this runtime's desired state are swept, and none
				// before it is known
				continue
			}
		}
		rec := openBy[o.Ref()]
		c, err := r.classifyObject(ctx, o, uids, get, warm, warmKnown, synced, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c == nil && rec != nil && rec.State == StateUnknown {
			// an earlier action failed (its deletion began, and waits on a
			// finalizer, say): retried until the object is gone
			c = &candidate{kind: rec.Kind, action: rec.Action, resource: o.Ref(), pool: o.Pool, runID: rec.RunID, lease: rec.LeaseVersion}
		}
		if c == nil {
			if o.Kind == sandbox.KindClaim {
				rep.Live++
			}
			continue
		}
		c.obj, c.resource, c.rec = o, o.Ref(), rec
		if c.pool == "" {
			c.pool = o.Pool
		}
		if c.rec != nil && c.rec.State == StateUnknown {
			c.kind, c.grace, c.notBefore = c.rec.Kind, 0, time.Time{} // a retry: the record's kind, at once
		}
		cands = append(cands, c)
	}
	cc, cerrs := r.collectCredentials(ctx, get, openBy)
	return append(cands, cc...), listed, append(errs, cerrs...)
}

// warmHas says whether pool keeps generation gen warm; gen may be a
// generation label (an id cut to 63 characters).
func warmHas(warm map[string]map[string]bool, pool, gen string) bool {
	if warm[pool][gen] {
		return true
	}
	for id := range warm[pool] {
		if kubeobjects.GenerationLabel(id) == gen {
			return true
		}
	}
	return false
}

// classifyObject says what cluster object o is a candidate of, or nil
// when something live owns it (or it is starting, or its deletion is under
// way and not yet stuck). uids holds the UID of every object of the pass
// by Kind/name.
func (r *Reconciler) classifyObject(ctx context.Context, o *sandbox.Object, uids map[string]string,
	get func(context.Context, string) (*runmanifest.Manifest, error), warm map[string]map[string]bool, warmKnown bool, synced, now time.Time) (*candidate, error) {
	c := &candidate{action: ActionDelete, lease: "uid " + o.UID}
	if !o.Deleting.IsZero() {
		// its deletion began: stuck once StuckAfter passed (a pod whose
		// kubelet never confirms, a finalizer that never clears)
		if now.Before(o.Deleting.Add(r.c.StuckAfter)) {
			return nil, nil
		}
		c.kind, c.action, c.force = KindStuckStopping, ActionFinish, true
		c.lease = "deleting@" + o.Deleting.UTC().Format(time.RFC3339)
		return c, nil
	}
	controlled := o.Controller != "" && uids[o.Controller] == o.ControllerUID // by an object that is there
	switch o.Kind {
	case sandbox.KindClaim:
		return r.classifyClaim(ctx, o, c, get, now)
	case sandbox.KindSecret:
		c.kind, c.runID = KindCredential, o.Owner
		return r.classifyRunObject(ctx, o, c, get)
	case sandbox.KindWarmPool:
		if !warmKnown || warmHas(warm, o.Pool, o.Generation) || (!synced.IsZero() && !o.Created.Before(synced)) {
			return nil, nil
		}
		c.kind, c.lease = KindWarmInactive, "warm@"+o.Generation
		c.still = r.stillInactive(o.Pool, o.Generation)
		return c, nil
	case sandbox.KindSandbox:
		switch {
		case controlled && strings.HasPrefix(o.Controller, sandbox.KindClaim+"/"):
			return nil, nil // its claim's
		case controlled:
			// a warm member of a live warm pool: swept with its pool
			if !warmKnown || warmHas(warm, o.Pool, o.Generation) || (!synced.IsZero() && !o.Created.Before(synced)) {
				return nil, nil
			}
			c.kind, c.lease = KindWarmInactive, "warm@"+o.Generation
			c.still = r.stillInactive(o.Pool, o.Generation)
			return c, nil
		}
	case sandbox.KindPod:
		if controlled {
			return nil, nil
		}
	default:
		return nil, nil
	}
	// a Sandbox or pod whose controller is gone, or that has none
	c.kind, c.grace = KindUnrecorded, r.c.Grace
	return c, nil
}

// stillInactive re-reads the desired state: nil when pool still keeps gen
// warm no more.
func (r *Reconciler) stillInactive(pool, gen string) func(context.Context) error {
	return func(context.Context) error {
		w, ok := r.c.Warm()
		if !ok || warmHas(w, pool, gen) {
			return fmt.Errorf("%w: generation %s of pool %s is warm again", errNotCandidate, gen, pool)
		}
		return nil
	}
}

// classifyClaim: a claim's lease is its run (the claim is named for it).
func (r *Reconciler) classifyClaim(ctx context.Context, o *sandbox.Object, c *candidate, get func(context.Context, string) (*runmanifest.Manifest, error), now time.Time) (*candidate, error) {
	if !o.Ready && now.Before(o.StartBy) {
		return nil, nil // its Create may still be under way
	}
	run := o.Owner
	c.runID, c.lease = run, run
	m, err := get(ctx, run)
	switch {
	case errors.Is(err, runs.ErrNotFound), run == "":
		if run != "" && r.c.Held != nil && r.c.Held(run) {
			return nil, nil // a proof claim under way: its lease is the runtime's
		}
		c.kind = KindNoLease
		if o.Ready {
			c.grace = r.c.Grace // a claim records its manifest just after it is ready
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
		return nil, fmt.Errorf("reconcile: %s: run %s: %w", o.Ref(), run, err)
	}
	c.lease = fmt.Sprintf("%s@%d", run, m.AllocationAttempt)
	switch {
	case m.Status.Final():
		c.kind = KindLeaseTerminal
		return c, nil
	case o.Bound != "" && m.SandboxID != "" && m.SandboxID != o.Bound:
		c.kind, c.grace = KindFenced, r.c.Grace
		attempt := m.AllocationAttempt
		c.still = func(ctx context.Context) error {
			m, err := r.c.Runs.Get(ctx, run)
			if err != nil {
				return fmt.Errorf("%w: run %s: %v", errNotCandidate, run, err)
			}
			if !m.Status.Final() && (m.SandboxID == o.Bound || m.AllocationAttempt != attempt) {
				return fmt.Errorf("%w: run %s is at attempt %d on sandbox %s now", errNotCandidate, run, m.AllocationAttempt, m.SandboxID)
			}
			return nil
		}
		return c, nil
	}
	return nil, nil
}

// classifyRunObject: an object of one run (a Secret holding its
// credential) outlives it once the run is final, or absent after the
// grace.
func (r *Reconciler) classifyRunObject(ctx context.Context, o *sandbox.Object, c *candidate, get func(context.Context, string) (*runmanifest.Manifest, error)) (*candidate, error) {
	run := o.Owner
	c.lease = run
	m, err := get(ctx, run)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		if r.c.Held != nil && r.c.Held(run) {
			return nil, nil
		}
		c.grace = r.c.Grace
	case err != nil:
		return nil, fmt.Errorf("reconcile: %s: run %s: %w", o.Ref(), run, err)
	case m.Status.Final():
		c.lease = fmt.Sprintf("%s@%d", run, m.AllocationAttempt)
	default:
		return nil, nil
	}
	c.still = func(ctx context.Context) error {
		m, err := r.c.Runs.Get(ctx, run)
		if err == nil && !m.Status.Final() {
			return fmt.Errorf("%w: run %s is open now", errNotCandidate, run)
		}
		if errors.Is(err, runs.ErrNotFound) && r.c.Held != nil && r.c.Held(run) {
			return fmt.Errorf("%w: the runtime holds %s now", errNotCandidate, run)
		}
		return nil
	}
	return c, nil
}
