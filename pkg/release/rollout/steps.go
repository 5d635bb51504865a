package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// The rollout's steps, in order: each a function of the driver that takes the
// rollout in its phase and returns it in the next (or ended).

// compatibility is step 1: the running control plane must understand the
// new generation and the one it replaces, and speak its runner's protocol.
func (d *Driver) compatibility(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	v, err := d.snapshot(ctx)
	if err != nil {
		return r, err
	}
	to, err := v.generationOf(r.To)
	if err != nil {
		return d.advance(ctx, r, d.rolledBack(err.Error()))
	}
	var from *generation.Generation
	if r.From != "" {
		if from, err = v.generationOf(r.From); err != nil {
			return d.advance(ctx, r, d.rolledBack(err.Error()))
		}
	}
	var info *runtimeapi.Info
	note, err := d.waitFor(ctx, &r, r.PhaseDeadline, func(ctx context.Context) (bool, string, error) {
		i, err := d.Fleet.Info(ctx)
		if err != nil {
			return false, "", fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		info = i
		return true, "", nil
	})
	if errors.Is(err, errDeadline) {
		return d.advance(ctx, r, d.failed("step 1: "+note))
	}
	if err != nil {
		return r, err
	}
	if why := incompatible(info, to, from); why != "" {
		return d.advance(ctx, r, d.rolledBack("step 1, compatibility: "+why))
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		size := v.pool.Spec.WarmSize
		if size < 1 {
			size = 1 // proofs need a warm member
		}
		if e := genState(v.state, r.To); e != nil {
			e.State, e.WarmSize, e.Since = pool.Warming, size, now.Truncate(time.Second)
		} else {
			v.state.Generations = append(v.state.Generations, pool.GenState{ID: r.To, Sequence: to.Sequence, State: pool.Warming, WarmSize: size, Since: now.Truncate(time.Second)})
		}
		d.enter(v, r, PhaseWarm, now)
		return PhaseWarm, fmt.Sprintf("warm %s in pool %s (%s, rollout %s)", r.To, d.Pool, plural(size, "sandbox"), r.ID),
			fmt.Sprintf("Step 1 passed: the control plane speaks control-plane protocol %s and runner protocol %s.", info.ControlPlaneProtocol, info.RunnerProtocol), nil
	})
}

// incompatible says why the fleet cannot run to (beside from), or "".
func incompatible(info *runtimeapi.Info, to, from *generation.Generation) string {
	var why []string
	for _, g := range []*generation.Generation{to, from} {
		if g == nil {
			continue
		}
		c := g.Compatibility
		if !info.ControlPlaneProtocol.Overlaps(runtimeapi.ProtocolRange(c.ControlPlaneProtocol)) {
			why = append(why, fmt.Sprintf("%s needs control-plane protocol %s, the control plane speaks %s", g.ID, c.ControlPlaneProtocol, info.ControlPlaneProtocol))
		}
		if !info.RunnerProtocol.Overlaps(runtimeapi.ProtocolRange(c.RunnerProtocol)) {
			why = append(why, fmt.Sprintf("%s's runner speaks protocol %s, the control plane %s", g.ID, c.RunnerProtocol, info.RunnerProtocol))
		}
	}
	return strings.Join(why, "; ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "x") {
		return fmt.Sprintf("%d %ses", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// warm is step 2: the runtime creates the new generation's warm members.
func (d *Driver) warm(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	v, err := d.snapshot(ctx)
	if err != nil {
		return r, err
	}
	want := 1
	if e := genState(v.state, r.To); e != nil && e.WarmSize > 0 {
		want = e.WarmSize
	}
	note, err := d.observed(ctx, &r, r.PhaseDeadline)
	if err == nil {
		note, err = d.waitFor(ctx, &r, r.PhaseDeadline, func(ctx context.Context) (bool, string, error) {
			st, err := d.Fleet.PoolStatus(ctx, d.Pool)
			if err != nil {
				return false, "", fmt.Errorf("%w: %w", errNoAnswer, err)
			}
			g := st.Generation(r.To)
			return g.Ready >= want, fmt.Sprintf("%d of %d warm members of %s ready (%d warming)", g.Ready, want, r.To, g.Warming), nil
		})
	}
	if errors.Is(err, errNoAnswer) {
		// Nothing is known of the new generation's warm capacity: fail
		// visibly; resume waits again once the fleet answers.
		return d.advance(ctx, r, d.failed("step 2, the fleet did not answer by the phase deadline: "+note))
	}
	if errors.Is(err, errDeadline) {
		return d.advance(ctx, r, d.rolledBack("step 2, warm capacity not ready by the phase deadline: "+note))
	}
	if err != nil {
		return r, err
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		d.enter(v, r, PhaseProve, now)
		return PhaseProve, fmt.Sprintf("prove %s in pool %s (rollout %s)", r.To, d.Pool, r.ID), "Step 2 passed: " + note + ".", nil
	})
}

// prove is step 3: proof checks on warm members of the new generation
// only, each recorded as evidence (in the config repository, signed). All
// pass: step 4 routes new claims to it in the same commit as the
// evidence. One fails: the rollout rolls back, with the evidence.
func (d *Driver) prove(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	v, err := d.snapshot(ctx)
	if err != nil {
		return r, err
	}
	checks := v.pool.Spec.Proofs
	if len(checks) == 0 {
		checks = pool.Proofs
	}
	// Proofs take a warm member: one must be ready (a proof of a run
	// before a crash used one up; the runtime refills it). A proof that
	// found none to allocate is tried again until the deadline.
	var res *runtimeapi.ProofResult
	note, err := d.waitFor(ctx, &r, r.PhaseDeadline, func(ctx context.Context) (bool, string, error) {
		st, err := d.Fleet.PoolStatus(ctx, d.Pool)
		if err != nil {
			return false, "", fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		if g := st.Generation(r.To); g.Ready == 0 {
			return false, fmt.Sprintf("no warm member of %s ready for the proofs (%d warming)", r.To, g.Warming), nil
		}
		out, err := d.Fleet.Prove(ctx, d.Pool, runtimeapi.ProofRequest{Generation: r.To, Rollout: r.ID, Checks: checks})
		if err != nil {
			return false, "", fmt.Errorf("the proofs did not run: %w", err)
		}
		res = out
		if len(out.Evidence) > 0 && out.Evidence[0].Check == "allocate" && !out.Evidence[0].Passed {
			return false, "allocate: " + out.Evidence[0].Reason, nil
		}
		return true, "", nil
	})
	if errors.Is(err, errDeadline) && res != nil {
		err = nil // the last proof, its allocation failed: the evidence says so
	}
	if errors.Is(err, errNoAnswer) {
		return d.advance(ctx, r, d.failed("step 3, the fleet did not answer by the phase deadline: "+note))
	}
	if errors.Is(err, errDeadline) {
		return d.advance(ctx, r, d.rolledBack("step 3, proofs not run by the phase deadline: "+note))
	}
	if err != nil {
		return r, err
	}
	info, _ := d.Fleet.Info(ctx)
	files, err := d.evidence(ctx, r, res, info)
	if err != nil {
		return r, err
	}
	dir := evidenceDir(d.Pool, r.To, r.ID)
	var failed []string
	for _, e := range res.Evidence {
		if !e.Passed {
			failed = append(failed, e.Check+": "+e.Reason)
		}
	}
	for _, c := range checks {
		if !slices.ContainsFunc(res.Evidence, func(e runtimeapi.Evidence) bool { return e.Check == c }) {
			failed = append(failed, c+": no evidence returned")
		}
	}
	writeFiles := func(v *view, r *pool.Rollout) error {
		for name, b := range files {
			if err := v.tree.WriteFile(dir+"/"+name, b); err != nil {
				return err
			}
		}
		r.Evidence = dir
		return nil
	}
	if len(failed) > 0 {
		return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
			if err := writeFiles(v, r); err != nil {
				return "", "", "", err
			}
			return d.rolledBack("step 3, proof failed: "+strings.Join(failed, "; "))(v, r, now)
		})
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		if err := writeFiles(v, r); err != nil {
			return "", "", "", err
		}
		for i := range v.state.Generations {
			g := &v.state.Generations[i]
			switch {
			case g.ID == r.To:
				g.State, g.Since = pool.Active, now.Truncate(time.Second)
			case g.State == pool.Active:
				g.State, g.WarmSize, g.Since = pool.Draining, 0, now.Truncate(time.Second)
			}
		}
		v.state.Target = r.To
		v.state.History = append(v.state.History, pool.HistoryEntry{Target: r.To, Sequence: genState(v.state, r.To).Sequence, At: now.Truncate(time.Second), Rollback: r.Rollback})
		d.enter(v, r, PhaseRoute, now)
		var names []string
		for _, e := range res.Evidence {
			names = append(names, e.Check)
		}
		return PhaseRoute, fmt.Sprintf("route new claims of pool %s to %s (rollout %s)", d.Pool, r.To, r.ID),
			fmt.Sprintf("Step 3 passed: %s, evidence in %s.", strings.Join(names, ", "), dir), nil
	})
}

// route is step 4 confirmed: the runtime serves from the routing commit.
// Until it does, nobody knows where claims go: the rollout fails visibly
// at the deadline rather than guessing.
func (d *Driver) route(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	note, err := d.observed(ctx, &r, r.PhaseDeadline)
	if errors.Is(err, errDeadline) {
		return d.advance(ctx, r, d.failed("step 4: the fleet has not confirmed the routing commit: "+note))
	}
	if err != nil {
		return r, err
	}
	var runs []string
	if r.From != "" {
		if st, err := d.Fleet.PoolStatus(ctx, d.Pool); err == nil {
			runs = st.Generation(r.From).Runs
		}
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		r.Draining = runs
		d.enter(v, r, PhaseDrain, now)
		r.PhaseDeadline = now.Add(v.pool.Spec.DrainDeadline.Duration).Truncate(time.Second)
		body := "Step 4 confirmed: the fleet serves from the routing commit."
		if len(runs) > 0 {
			body += "\nStill running on " + r.From + ": " + strings.Join(runs, ", ")
		}
		return PhaseDrain, fmt.Sprintf("drain %s of pool %s (rollout %s): %s open", orNone(r.From), d.Pool, r.ID, plural(len(runs), "run")), body, nil
	})
}

// drain is step 5: the old generation's claims end, up to the pool's
// drain deadline. At the deadline the pool's setting says what happens:
// "stop" ends them (listed), "wait" keeps waiting with them listed.
func (d *Driver) drain(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	v, err := d.snapshot(ctx)
	if err != nil {
		return r, err
	}
	open := func(ctx context.Context) (bool, string, error) {
		if r.From == "" {
			return true, "no generation to drain", nil
		}
		st, err := d.Fleet.PoolStatus(ctx, d.Pool)
		if err != nil {
			return false, "", fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		g := st.Generation(r.From)
		return g.Claimed == 0, fmt.Sprintf("%s open on %s: %s", plural(g.Claimed, "run"), r.From, strings.Join(g.Runs, ", ")), nil
	}
	note, err := d.waitFor(ctx, &r, r.PhaseDeadline, open)
	if errors.Is(err, errDeadline) {
		st, serr := d.Fleet.PoolStatus(ctx, d.Pool)
		var runs []string
		if serr == nil {
			runs = st.Generation(r.From).Runs
		}
		if v.pool.Spec.OnDrainDeadline == "checkpoint" {
			var failed *pool.Rollout
			if r, failed, err = d.drainCheckpoint(ctx, r); failed != nil || err != nil {
				return failed, err
			}
			note, err = d.waitFor(ctx, &r, r.PhaseDeadline, open)
			if errors.Is(err, errDeadline) {
				return d.advance(ctx, r, d.failed("step 5: runs still open on "+r.From+" after checkpointing them: "+note))
			}
		} else if v.pool.Spec.OnDrainDeadline == "stop" {
			stopped, serr := d.Fleet.Stop(ctx, d.Pool, r.From)
			if serr != nil {
				return d.advance(ctx, r, d.failed("step 5: drain deadline reached, stopping the runs of "+r.From+" failed: "+serr.Error()))
			}
			if r, err = d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
				r.Draining = stopped.Stopped
				r.PhaseDeadline = now.Add(deadline(v.pool, PhaseDrain)).Truncate(time.Second)
				return "drain-stop", fmt.Sprintf("drain deadline of %s in pool %s: stopped %s", r.From, d.Pool, plural(len(stopped.Stopped), "run")),
					"Stopped: " + strings.Join(stopped.Stopped, ", "), nil
			}); err != nil {
				return r, err
			}
		} else if r, err = d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
			r.Draining = runs
			r.PhaseDeadline = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) // the pool says wait
			return "drain-wait", fmt.Sprintf("drain deadline of %s in pool %s passed: waiting for %s (onDrainDeadline: wait)", r.From, d.Pool, plural(len(runs), "run")),
				"Still running: " + strings.Join(runs, ", "), nil
		}); err != nil {
			return r, err
		}
		note, err = d.waitFor(ctx, &r, r.PhaseDeadline, open)
		if errors.Is(err, errDeadline) {
			return d.advance(ctx, r, d.failed("step 5: runs still open after stopping them: "+note))
		}
	}
	if err != nil {
		return r, err
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		r.Draining = nil
		if e := genState(v.state, r.From); e != nil && e.State == pool.Draining {
			e.State, e.WarmSize, e.Since = pool.Retained, 0, now.Truncate(time.Second)
		}
		d.enter(v, r, PhaseRemove, now)
		return PhaseRemove, fmt.Sprintf("remove the warm capacity of %s in pool %s (rollout %s)", orNone(r.From), d.Pool, r.ID), "Step 5 done: " + note + ".", nil
	})
}

// remove is step 6: the runtime runs nothing of the old generation any
// more. Step 7 keeps it retained for its rollback and restore windows
// (slipway gc deletes nothing before they close) and ends the rollout.
func (d *Driver) remove(ctx context.Context, r *pool.Rollout) (*pool.Rollout, error) {
	note, err := d.observed(ctx, &r, r.PhaseDeadline)
	if err == nil {
		note, err = d.waitFor(ctx, &r, r.PhaseDeadline, func(ctx context.Context) (bool, string, error) {
			if r.From == "" {
				return true, "no old generation", nil
			}
			// Each look syncs first: a fleet with no reconcile loop of its
			// own (a cluster without a garbage collector) collects there
			// what its last sync left behind.
			if _, err := d.Fleet.Sync(ctx); err != nil {
				return false, "", fmt.Errorf("%w: it did not sync: %w", errNoAnswer, err)
			}
			st, err := d.Fleet.PoolStatus(ctx, d.Pool)
			if err != nil {
				return false, "", fmt.Errorf("%w: %w", errNoAnswer, err)
			}
			g := st.Generation(r.From)
			n := g.Ready + g.Warming + g.Claimed
			return n == 0, fmt.Sprintf("%s of %s left", plural(n, "sandbox"), r.From), nil
		})
	}
	if errors.Is(err, errDeadline) {
		return d.advance(ctx, r, d.failed("step 6: the old warm capacity is not gone: "+note))
	}
	if err != nil {
		return r, err
	}
	return d.advance(ctx, r, func(v *view, r *pool.Rollout, now time.Time) (string, string, string, error) {
		d.enter(v, r, PhaseRetain, now)
		r.Status, r.Holder, r.LeaseUntil, r.Ended = pool.RolloutSucceeded, "", time.Time{}, now.Truncate(time.Second)
		body := "Step 6 done: " + note + "."
		if r.From != "" {
			body += fmt.Sprintf("\nStep 7: %s is retained: rollback window until %s, restore window until %s.", r.From,
				now.Add(v.pool.Spec.RollbackWindow.Duration).Format(time.RFC3339), now.Add(v.pool.Spec.RestoreWindow.Duration).Format(time.RFC3339))
		}
		return PhaseRetain, fmt.Sprintf("rollout %s of pool %s succeeded: %s is active", r.ID, d.Pool, r.To), body, nil
	})
}
