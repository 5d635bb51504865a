package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
)

// Swept is what a sweep of the runtime's checkpoints deleted and kept: in
// its store, and in its checkpoint repository when it has one.
type Swept struct {
	// Collected is the store's.
	*checkpoint.Collected
	// Published is the repository's (nil without one).
	Published *checkpoint.CollectedPublished
}

// SweepCheckpoints deletes the checkpoints whose pool's restore window has
// closed at now (taken more than the pool's restoreWindow before now),
// never one inside it, never the head of a run still open (held by this
// runtime, suspended or not, or open in the run store), and never one of a
// pool the desired state does not name (its window is not known). Blobs no
// remaining checkpoint uses go with them. With a checkpoint repository, the
// same checkpoints are deleted there first, with their signatures and
// attestations (checkpoint.CollectPublished); a sweep the registry fails
// stops before the store is touched, so the next one finds them all again.
// With dryRun nothing is removed and the answer says what would be.
func (r *Runtime) SweepCheckpoints(ctx context.Context, now time.Time, dryRun bool) (*Swept, error) {
	got, _, err := r.sweepCheckpoints(ctx, now, dryRun)
	return got, err
}

// sweepCheckpoints is SweepCheckpoints, with the restore window of each
// pool it judged by.
func (r *Runtime) sweepCheckpoints(ctx context.Context, now time.Time, dryRun bool) (*Swept, map[string]time.Duration, error) {
	cps := r.o.checkpoints
	if cps == nil {
		return nil, nil, fmt.Errorf("%w: no checkpoint store or key (WithCheckpoints)", ErrNoCheckpoints)
	}
	d, _ := r.desired()
	if d == nil {
		return nil, nil, fmt.Errorf("%w: sweep checkpoints: the restore windows are not known", ErrNoDesired)
	}
	windows := map[string]time.Duration{}
	for name, p := range d.Pools {
		if p.Pool != nil {
			windows[name] = p.Pool.Spec.RestoreWindow.Duration
		}
	}
	keep := map[string]bool{}
	r.mu.Lock()
	for _, c := range r.claims {
		c.mu.Lock()
		keep[c.checkpointID] = true
		c.mu.Unlock()
	}
	r.mu.Unlock()
	open, err := r.store.Open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime: sweep checkpoints: open runs: %w", err)
	}
	for _, id := range open {
		m, err := r.store.Get(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: sweep checkpoints: run %s: %w", id, err)
		}
		keep[m.WorkspaceCheckpointID] = true
	}
	closed := func(p checkpoint.Predicate) bool {
		w, ok := windows[p.Pool]
		return ok && p.Created.Before(now.Add(-w))
	}
	out := &Swept{}
	repo, ok, err := cps.repository()
	if err != nil {
		return nil, nil, fmt.Errorf("runtime: sweep checkpoints: %w", err)
	}
	if ok {
		local, err := cps.Store.List()
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: sweep checkpoints: %w", err)
		}
		pub, err := checkpoint.CollectPublished(ctx, repo, cps.Verifier, local, closed, keep, dryRun, cps.registryOptions()...)
		if err != nil {
			n := 0
			if pub != nil && !dryRun {
				n = len(pub.Deleted)
			}
			return nil, nil, fmt.Errorf("runtime: sweep checkpoints of %s (%d deleted there, the local store not swept): %w", repo, n, err)
		}
		out.Published = pub
	}
	if out.Collected, err = cps.Store.CollectClosed(closed, keep, dryRun); err != nil || dryRun {
		return out, windows, err
	}
	n, err := r.sweepStaging()
	if n > 0 {
		r.logf("runtime: sweep removed %d staging copies of workspaces of runs this runtime no longer holds", n)
	}
	return out, windows, err
}
