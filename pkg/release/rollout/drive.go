package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// The seven phases, in the seed's order.
const (
	PhaseCompatibility = "compatibility" // 1: the control plane understands both generations
	PhaseWarm          = "warm"          // 2: warm capacity of the new generation
	PhaseProve         = "prove"         // 3: proof checks on its warm members
	PhaseRoute         = "route"         // 4: new claims go to it
	PhaseDrain         = "drain"         // 5: the old generation's claims end
	PhaseRemove        = "remove"        // 6: the old warm capacity is gone
	PhaseRetain        = "retain"        // 7: the old generation is kept for its windows
)

// Phases in order (pool.Phases).
var Phases = pool.Phases

// Run drives the pool's rollout in progress to a terminal state under
// the lease: it takes the lease (or stops with ErrHeld), then works phase
// after phase, one commit per step, from wherever the rollout stands (so a
// crashed driver resumes). It returns the rollout as it ended: nil error
// when it succeeded, ErrRolledBack or ErrFailed (with the reason)
// otherwise. With no rollout in progress (the last one ended, and no
// start was committed since) it drives nothing and returns
// ErrNotInProgress, saying how the last one ended: an old outcome is never
// reported as the current one.
func (d *Driver) Run(ctx context.Context) (*pool.Rollout, error) {
	return d.run(ctx, "")
}

// Drive is Run for the rollout id (the one Start returned): if it already
// ended, Drive returns how; if the pool's rollout is another one by now,
// it stops with ErrChanged.
func (d *Driver) Drive(ctx context.Context, id string) (*pool.Rollout, error) {
	if id == "" {
		return nil, errors.New("rollout: Drive needs the rollout's id")
	}
	return d.run(ctx, id)
}

func (d *Driver) run(ctx context.Context, id string) (*pool.Rollout, error) {
	d.defaults()
	if d.Fleet == nil {
		return nil, errors.New("rollout: no fleet to drive the rollout on (--runtime)")
	}
	if d.Signer == nil && !d.UnsignedEvidence {
		return nil, errors.New("rollout: evidence is signed: give a signing key (or choose unsigned evidence explicitly)")
	}
	r, err := d.acquire(ctx, id)
	if err != nil {
		return r, err
	}
	for !r.Terminal() && r.Status == pool.RolloutRunning {
		var step func(context.Context, *pool.Rollout) (*pool.Rollout, error)
		switch r.Phase {
		case PhaseCompatibility:
			step = d.compatibility
		case PhaseWarm:
			step = d.warm
		case PhaseProve:
			step = d.prove
		case PhaseRoute:
			step = d.route
		case PhaseDrain:
			step = d.drain
		case PhaseRemove:
			step = d.remove
		default:
			return r, fmt.Errorf("rollout: %s of pool %s is in phase %q, which this driver does not know", r.ID, d.Pool, r.Phase)
		}
		if r, err = step(ctx, r); err != nil {
			return r, err
		}
	}
	return r, d.outcome(r)
}

// outcome is how r ended, as an error (nil: it succeeded).
func (d *Driver) outcome(r *pool.Rollout) error {
	switch r.Status {
	case pool.RolloutSucceeded:
		return nil
	case pool.RolloutRolledBack:
		return fmt.Errorf("%w: %s of pool %s: %s", ErrRolledBack, r.ID, d.Pool, r.Reason)
	default:
		return fmt.Errorf("%w: %s of pool %s in phase %s: %s (owner %s, phase deadline %s): resume it with rollout resume",
			ErrFailed, r.ID, d.Pool, r.Phase, r.Reason, r.Holder, r.PhaseDeadline.Format(time.RFC3339))
	}
}

// notInProgress says that pool has no rollout in progress, and how the
// last one (r, nil for none) ended.
func (d *Driver) notInProgress(r *pool.Rollout) error {
	if r == nil {
		return fmt.Errorf("%w on pool %s: none was ever started (rollout start)", ErrNotInProgress, d.Pool)
	}
	how := r.Status
	if r.Reason != "" {
		how += " (" + r.Reason + ")"
	}
	when := "at an unrecorded time"
	if !r.Ended.IsZero() {
		when = "at " + r.Ended.Format(time.RFC3339)
	}
	return fmt.Errorf("%w on pool %s: the last rollout, %s (%s → %s, started %s), ended %s %s; no rollout start has been committed since (start one with rollout start)",
		ErrNotInProgress, d.Pool, r.ID, orNone(r.From), r.To, r.Started.Format(time.RFC3339), how, when)
}

// acquire takes the lease of the pool's rollout (of rollout id, when
// given): free, expired, ours, or held by a process of this host that is
// gone. A failed rollout runs again, with a fresh phase deadline. A
// rollout that ended is returned as it is when it is id; without an id it
// is ErrNotInProgress.
func (d *Driver) acquire(ctx context.Context, id string) (*pool.Rollout, error) {
	var out *pool.Rollout
	_, err := d.Repo.Update(ctx, gitops.Request{Branch: d.Branch, Author: d.Author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		v, err := readView(t, d.Pool)
		if err != nil {
			return nil, err
		}
		r := v.state.Rollout
		if id != "" && (r == nil || r.ID != id) {
			return nil, fmt.Errorf("%w: rollout %s of pool %s is no longer the pool's rollout: %s", ErrChanged, id, d.Pool, describe(r))
		}
		if r == nil || (id == "" && r.Terminal()) {
			return nil, d.notInProgress(r)
		}
		out = r
		if r.Terminal() {
			return nil, nil // nothing to drive: Run reports how it ended
		}
		now := d.Now().UTC()
		if r.Holder != "" && r.Holder != d.Holder && now.Before(r.LeaseUntil) && holderAlive(r.Holder) {
			return nil, fmt.Errorf("%w: rollout %s of pool %s is held by %s until %s", ErrHeld, r.ID, d.Pool, r.Holder, r.LeaseUntil.Format(time.RFC3339))
		}
		subject := fmt.Sprintf("drive %s of pool %s (phase %s)", r.ID, d.Pool, r.Phase)
		if r.Status == pool.RolloutFailed {
			subject = fmt.Sprintf("resume %s of pool %s in phase %s after: %s", r.ID, d.Pool, r.Phase, r.Reason)
			r.Status, r.Reason = pool.RolloutRunning, ""
			r.PhaseStarted, r.PhaseDeadline = now.Truncate(time.Second), now.Add(deadline(v.pool, r.Phase)).Truncate(time.Second)
		}
		r.Holder, r.LeaseUntil = d.Holder, now.Add(d.Lease).Truncate(time.Second)
		d.failpoint("before-commit:lease")
		return d.write(v, "lease", subject, "")
	}})
	if err != nil {
		return nil, err
	}
	if !out.Terminal() {
		d.failpoint("after-commit:lease")
	}
	return out, nil
}

// change is one step's edit of the pool's state.
type change func(v *view, r *pool.Rollout, now time.Time) (step, subject, body string, err error)

// advance commits a step: the rollout must still be r (same id, phase and
// holder, running), else ErrChanged. The lease is renewed with it.
func (d *Driver) advance(ctx context.Context, r *pool.Rollout, fn change) (*pool.Rollout, error) {
	var out *pool.Rollout
	var step string
	_, err := d.Repo.Update(ctx, gitops.Request{Branch: d.Branch, Author: d.Author, Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		v, err := readView(t, d.Pool)
		if err != nil {
			return nil, err
		}
		cur := v.state.Rollout
		if cur == nil || cur.ID != r.ID || cur.Phase != r.Phase || cur.Holder != d.Holder || cur.Status != pool.RolloutRunning {
			return nil, fmt.Errorf("%w: %s of pool %s: %s", ErrChanged, r.ID, d.Pool, describe(cur))
		}
		now := d.Now().UTC()
		s, subject, body, err := fn(v, cur, now)
		if err != nil {
			return nil, err
		}
		step = s
		if cur.Status == pool.RolloutRunning {
			cur.LeaseUntil = now.Add(d.Lease).Truncate(time.Second)
		}
		d.failpoint("before-commit:" + step)
		out = cur
		return d.write(v, step, subject, body)
	}})
	if err != nil {
		return nil, err
	}
	d.failpoint("after-commit:" + step)
	d.logf("%s: %s (%s)", out.ID, step, out.Status)
	return out, nil
}

func describe(r *pool.Rollout) string {
	if r == nil {
		return "the pool has no rollout any more"
	}
	s := fmt.Sprintf("rollout %s is %s in phase %s", r.ID, r.Status, r.Phase)
	if r.Holder != "" {
		s += ", held by " + r.Holder
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// enter moves r into phase (its deadline starts now).
func (d *Driver) enter(v *view, r *pool.Rollout, phase string, now time.Time) {
	r.Phase, r.PhaseStarted = phase, now.Truncate(time.Second)
	r.PhaseDeadline = now.Add(deadline(v.pool, phase)).Truncate(time.Second)
}

// rolledBack is a change that rolls the rollout back with reason.
func (d *Driver) rolledBack(reason string) change {
	return func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		c, err := d.rollBack(v, reason)
		if err != nil {
			return "", "", "", err
		}
		return "rolled-back", c.Subject, c.Body, nil
	}
}

// failed is a change that stops the rollout in a visible, resumable
// failure: the holder stays named as its owner, the lease ends.
func (d *Driver) failed(reason string) change {
	return func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		r.Status, r.Reason, r.LeaseUntil = pool.RolloutFailed, reason, now.Truncate(time.Second)
		return "failed", fmt.Sprintf("%s of pool %s failed in phase %s", r.ID, d.Pool, r.Phase), reason, nil
	}
}

// errDeadline: a wait reached the phase deadline.
var errDeadline = errors.New("phase deadline reached")

// errNoAnswer marks a condition's error as the fleet not answering (or not
// syncing) at all, as opposed to answering "not yet". A wait whose last
// look got no answer ends with an error that is both errDeadline and
// errNoAnswer: nothing was observed about the new generation, so the steps
// that roll back on what they observe (warm) fail resumably instead.
var errNoAnswer = errors.New("the fleet did not answer")

// waitFor polls cond until it is done or the phase deadline passes
// (errDeadline, with cond's last note, and errNoAnswer too when cond's
// last error was one). Errors of cond (a fleet that does not answer) are
// retried until then. The lease is renewed on the way.
func (d *Driver) waitFor(ctx context.Context, r **pool.Rollout, until time.Time, cond func(ctx context.Context) (bool, string, error)) (string, error) {
	note := ""
	waiting, lastErr := "", "" // for Progress: the last answer, the last error
	for {
		d.report(*r, until, waiting, lastErr, d.Now())
		done, n, err := cond(ctx)
		unanswered := false
		switch {
		case err != nil:
			note, unanswered = err.Error(), errors.Is(err, errNoAnswer)
			lastErr = note
		case done:
			return n, nil
		default:
			note, waiting, lastErr = n, n, ""
		}
		d.report(*r, until, waiting, lastErr, time.Time{})
		now := d.Now()
		if !now.Before(until) {
			if unanswered {
				return note, fmt.Errorf("%w: %w", errDeadline, errNoAnswer)
			}
			return note, errDeadline
		}
		if (*r).LeaseUntil.Sub(now) < d.Lease/2 {
			nr, err := d.advance(ctx, *r, func(v *view, cur *pool.Rollout, now time.Time) (string, string, string, error) {
				return "lease", fmt.Sprintf("renew the lease of %s of pool %s (phase %s): %s", cur.ID, d.Pool, cur.Phase, note), "", nil
			})
			if err != nil {
				return note, err
			}
			*r = nr
		}
		select {
		case <-ctx.Done():
			return note, ctx.Err()
		case <-time.After(d.Poll):
		}
	}
}

// observed waits until the fleet serves from the branch's head or later,
// so that a step counts as done only when the runtime reports its commit.
func (d *Driver) observed(ctx context.Context, r **pool.Rollout, until time.Time) (string, error) {
	_, head, err := d.Repo.Snapshot(ctx, d.Branch)
	if err != nil {
		return "", err
	}
	return d.waitFor(ctx, r, until, func(ctx context.Context) (bool, string, error) {
		rev, err := d.Fleet.Sync(ctx)
		if err != nil {
			return false, "", fmt.Errorf("%w: it did not sync: %w", errNoAnswer, err)
		}
		ok, err := d.Repo.Contains(ctx, d.Branch, rev, head)
		if err != nil {
			return false, "", err
		}
		return ok, fmt.Sprintf("the fleet serves %s, not yet %s", short(rev), short(head)), nil
	})
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// Wait is what a step waits for, as Driver.Progress hears it.
type Wait struct {
	Rollout string `json:"rollout"`
	// Step is the step's number (1 to 7) and Phase its name.
	Step  int    `json:"step"`
	Phase string `json:"phase"`
	// For says what the step waits for: the last look's answer ("1 of 2
	// warm members of g-… ready"), or the step's goal before the first.
	For string `json:"for"`
	// Until is the phase deadline.
	Until time.Time `json:"until"`
	// Asking is when the look under way began (zero between looks): a
	// fleet that does not answer keeps it in the past.
	Asking time.Time `json:"asking,omitzero"`
	// LastError is the fleet's last error ("" when its last look
	// answered).
	LastError string `json:"lastError,omitempty"`
}

// goals say what each step waits for before the first look answers.
var goals = map[string]string{
	PhaseCompatibility: "the fleet to say which protocols its control plane speaks",
	PhaseWarm:          "the fleet to warm the new generation",
	PhaseProve:         "a warm member of the new generation to prove",
	PhaseRoute:         "the fleet to serve from the routing commit",
	PhaseDrain:         "the old generation's runs to end",
	PhaseRemove:        "the old generation's warm capacity to go",
}

func (d *Driver) report(r *pool.Rollout, until time.Time, note, lastErr string, asking time.Time) {
	if d.Progress == nil || r == nil {
		return
	}
	if note == "" {
		note = goals[r.Phase]
	}
	d.Progress(Wait{Rollout: r.ID, Step: slices.Index(Phases, r.Phase) + 1, Phase: r.Phase, For: note, Until: until, Asking: asking, LastError: lastErr})
}
