package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// entry is c's record in state, with outcome or lastErr.
func (r *Reconciler) entry(c *candidate, state, lastErr, outcome string, attempted bool) entry {
	now := r.now()
	rec := Record{Kind: c.kind, Resource: c.resource, Pool: c.pool, RunID: c.runID, LeaseVersion: c.lease, Action: c.action,
		State: state, Outcome: outcome, LastError: lastErr, Owner: r.c.Owner, First: now, Updated: now}
	if state == StateUnknown {
		rec.Deadline = now.Add(r.c.UnknownDeadline)
		if c.rec != nil && !c.rec.Deadline.IsZero() {
			rec.Deadline = c.rec.Deadline
		}
	}
	return entry{Record: rec, attempted: attempted}
}

// act re-reads c's authoritative record, fences it, and cleans it up,
// bounded by the action timeout; it returns the record of what happened,
// or false when nothing happened because ctx ended before the re-read
// could say (the reconciler is stopping: the record stays as it was).
func (r *Reconciler) act(ctx context.Context, c *candidate) (entry, bool) {
	actx, cancel := context.WithTimeout(ctx, r.c.ActionTimeout)
	defer cancel()
	if c.still != nil {
		if err := c.still(actx); err != nil {
			if ctx.Err() != nil {
				return entry{}, false // a read cut short says nothing of the lease
			}
			return r.entry(c, StateKept, "", err.Error(), false), true
		}
	}
	return r.acted(actx, c), true
}

// acted fences and cleans up c (its re-read done) within actx; it
// returns the record of what happened.
func (r *Reconciler) acted(actx context.Context, c *candidate) entry {
	var err error
	switch {
	case c.fp != "":
		r.c.Credentials.Revoke(c.fp)
		return r.entry(c, StateDone, "", "revoked: "+whyCredential(c), true)
	case c.obj != nil:
		err = r.bounded(actx, "delete "+c.obj.Ref(), func(ctx context.Context) error {
			if fp := r.failpoint.Load(); *fp == FailpointDeleteHang {
				r.c.Logger.Warn("failpoint reached", "name", *fp, "object", c.resource)
				<-ctx.Done()
				return ctx.Err()
			}
			return r.c.Backend.(sandbox.Objects).DeleteObject(ctx, *c.obj, c.force)
		})
		if errors.Is(err, sandbox.ErrOwnerConflict) {
			return r.entry(c, StateKept, "", "fence: "+err.Error(), false)
		}
	case c.trash:
		err = r.bounded(actx, "finish the deletion of sandbox "+c.resource, func(ctx context.Context) error {
			return r.c.Backend.(Interrupted).FinishInterrupted(ctx, c.resource)
		})
	default:
		kept, why, ferr := r.fence(actx, c)
		if kept {
			return r.entry(c, StateKept, "", why, false)
		}
		err = ferr
		if err == nil {
			err = r.bounded(actx, "delete sandbox "+c.resource, func(ctx context.Context) error {
				if fp := r.failpoint.Load(); *fp == FailpointDeleteHang {
					r.c.Logger.Warn("failpoint reached", "name", *fp, "sandbox", c.resource)
					<-ctx.Done()
					return ctx.Err()
				}
				return r.c.Backend.Delete(ctx, c.resource)
			})
		}
	}
	if err != nil {
		e := r.entry(c, StateUnknown, err.Error(), "", true)
		attempts := 1
		if c.rec != nil {
			attempts += c.rec.Attempts
		}
		r.c.Logger.Error("cleanup unknown", "kind", c.kind, "resource", c.resource, "pool", c.pool, "run_id", c.runID,
			"lease", c.lease, "action", c.action, "owner", r.c.Owner, "deadline", e.Deadline, "attempts", attempts,
			"overdue", r.now().After(e.Deadline), "error", err.Error())
		return e
	}
	if r.c.Deleted != nil {
		switch {
		case c.obj == nil:
			r.c.Deleted(c.resource)
		case c.obj.Kind == sandbox.KindClaim && c.obj.Bound != "":
			r.c.Deleted(c.obj.Bound)
		case c.obj.Kind == sandbox.KindSandbox:
			r.c.Deleted(c.obj.Name)
		}
	}
	return r.entry(c, StateDone, "", c.action+"d", true)
}

// fence takes a running sandbox from the owner the pass read to the
// reconciler's own with the owner compare-and-swap a claim uses: when a
// claim or an adoption changed the owner since, the sandbox is kept. A dead
// sandbox cannot be claimed; one the reconciler took already is its own.
func (r *Reconciler) fence(ctx context.Context, c *candidate) (kept bool, why string, err error) {
	s := c.s
	if s.State == sandbox.StateDead || strings.HasPrefix(s.Owner, ownerReaping) {
		return false, "", nil
	}
	_, err = r.c.Backend.SetOwner(ctx, s.ID, s.Owner, ownerReaping+r.c.Owner)
	switch {
	case err == nil, errors.Is(err, sandbox.ErrNotRunning): // taken; or it died meanwhile: only its deletion is left
		return false, "", nil
	case errors.Is(err, sandbox.ErrOwnerConflict):
		return true, fmt.Sprintf("fence: its owner is no longer %q: %v", s.Owner, err), nil
	case errors.Is(err, sandbox.ErrNotFound):
		return true, "gone before the action", nil
	default:
		return false, "", fmt.Errorf("fence sandbox %s: %w", s.ID, err)
	}
}

// boundedGrace is how long bounded waits, past the deadline, for f to
// say why it did not finish.
const boundedGrace = time.Second

// bounded runs f with ctx's deadline as its limit: a call that does not
// return in time is an error now (it may finish later: the next pass
// finds out).
func (r *Reconciler) bounded(ctx context.Context, what string, f func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// a call that notices its deadline may still say why (a cluster
		// object's finalizers): wait a moment for that
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%s: no answer within %s: %w", what, r.c.ActionTimeout, err)
			}
			return nil
		case <-time.After(boundedGrace):
		}
		return fmt.Errorf("%s: no answer within %s: %w", what, r.c.ActionTimeout, ctx.Err())
	}
}

func whyCredential(c *candidate) string {
	if c.runID == "" {
		return "no run"
	}
	return "its run " + c.runID + " no longer holds it"
}
