package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// Stop ends every open claim of generation gen in pool (a rollout's drain
// deadline with onDrainDeadline: stop): the command running is fenced out,
// the credential revoked, the sandbox deleted, and the manifest finalised
// as released (no result was published). It returns the run ids it
// stopped, sorted; those it could not stop make the error.
func (r *Runtime) Stop(ctx context.Context, pool, gen string) ([]string, error) {
	r.mu.Lock()
	var open []*claim
	for _, c := range r.claims {
		if c.pool == pool && c.gen.ID == gen {
			open = append(open, c)
		}
	}
	r.mu.Unlock()
	var stopped []string
	var errs []error
	for _, c := range open {
		c.op.Lock()
		c.mu.Lock()
		if c.released {
			c.mu.Unlock()
			c.op.Unlock()
			continue
		}
		s, credential := c.sandbox, c.credential
		c.released = true
		close(c.fence)
		c.mu.Unlock()
		err := func() error {
			released := r.now()
			r.revoke(ctx, s, credential)
			if s != nil {
				if err := r.warm.Release(ctx, s.ID); err != nil {
					return err
				}
			}
			return r.finalUpdate(ctx, c.runID, s, func(m *runmanifest.Manifest) {
				m.Status = runmanifest.EndStatus(m, nil) // stopped mid-run: unknown, never completed
				m.Lifecycle.ResourcesReleased = released
			})
		}()
		if err != nil {
			c.mu.Lock()
			c.released = false
			c.fence = make(chan struct{})
			c.mu.Unlock()
			c.op.Unlock()
			errs = append(errs, fmt.Errorf("run %s: %w", c.runID, err))
			continue
		}
		close(c.done)
		r.dropStaging(c.runID)
		c.op.Unlock()
		r.mu.Lock()
		delete(r.claims, c.runID)
		r.forgetKey(c)
		r.mu.Unlock()
		if err := r.dropSuspended(c.runID); err != nil {
			r.logf("%v", err) // a restart finds the run ended and drops the record then
		}
		stopped = append(stopped, c.runID)
	}
	slices.Sort(stopped)
	return stopped, errors.Join(errs...)
}
