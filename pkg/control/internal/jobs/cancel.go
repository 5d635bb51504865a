package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// addStep records a step's outcome under c's fence.
func addStep(c *controlapi.Cancellation, step, outcome, detail string) {
	c.Steps = append(c.Steps, controlapi.CancelStep{Step: step, Outcome: outcome, Fence: c.Fence, At: time.Now().UTC(), Detail: detail})
}

// cancelQueued ends a job that never started: the steps with nothing to do
// say so.
func cancelQueued(j *controlapi.Job, now time.Time) {
	c := j.Cancellation
	addStep(c, controlapi.StepStopCommands, controlapi.StepDone, "no command had started")
	for _, s := range []string{controlapi.StepSignalRunner, controlapi.StepEndWork} {
		addStep(c, s, controlapi.StepNotApplicable, "no runner was allocated")
	}
	addStep(c, controlapi.StepReconcileDeliveries, controlapi.StepDone, "the job produced no output; its result (canceled) is delivered like any other")
	addStep(c, controlapi.StepCheckpoint, controlapi.StepUnavailable, "no sandbox was allocated: nothing to checkpoint")
	addStep(c, controlapi.StepCleanupHooks, controlapi.StepNotApplicable, "no cleanup hooks are configured")
	addStep(c, controlapi.StepRevoke, controlapi.StepNotApplicable, "no claim or credential was issued")
	addStep(c, controlapi.StepDeleteSandbox, controlapi.StepNotApplicable, "no sandbox was allocated")
	addStep(c, controlapi.StepFinal, controlapi.StepDone, "canceled before it started")
	j.State, j.Reason, j.Detail, j.EndedAt = controlapi.Canceled, "canceled", "canceled before it started", tp(now)
}

// completeCancel carries a canceling job's cleanup through to its observed
// end: release the claim (the runtime deletes the sandbox and its
// processes, and revokes the claim's credential), then observe it: the
// run's manifest says its resources were released, and the claim's token is
// refused. It commits each step; all observed, the job is canceled;
// otherwise it stays canceling with reason cleanup_incomplete, an owner
// and a deadline (the recoverer tries again).
func (e *Engine) completeCancel(ctx context.Context, id string, rt Runtime, runID, grant string, signalled string) {
	ctx = context.WithoutCancel(ctx)
	step := func(f func(j *controlapi.Job, c *controlapi.Cancellation)) {
		_, _ = e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
			if j.Cancellation == nil {
				j.Cancellation = &controlapi.Cancellation{Fence: 1, RequestedAt: time.Now().UTC()}
			}
			f(j, j.Cancellation)
			return nil
		})
	}
	step(func(_ *controlapi.Job, c *controlapi.Cancellation) {
		if !c.Settled(controlapi.StepStopCommands) {
			addStep(c, controlapi.StepStopCommands, controlapi.StepDone, "no command starts after the request")
		}
		if !c.Settled(controlapi.StepSignalRunner) {
			addStep(c, controlapi.StepSignalRunner, controlapi.StepDone, signalled)
		}
	})
	e.failpoint(ctx, "cancel.signalled")

	var released, refused bool
	var detail string
	ckOutcome, ckDetail := controlapi.StepUnavailable, ""
	var ckpt *controlapi.JobCheckpoint
	if runID == "" {
		// canceled while claiming: find the claim its request key may
		// have made, and adopt it to release it
		runID, grant, detail = e.discoverClaim(ctx, id, &rt)
	}
	switch {
	case runID == "" && detail == "":
		detail = "no claim was made"
		released, refused = true, true
	case runID == "":
		// detail says why the claim could not be looked for
	case rt.Client == nil:
		detail = fmt.Sprintf("run %s: its runtime is not configured on this control plane", runID)
	default:
		var res *runtimeapi.CheckpointResult
		ckOutcome, ckDetail, res = e.cancelCheckpoint(ctx, id, rt, runID, grant) // step 6, while the sandbox exists
		rerr := rt.Client.Release(ctx, runID, runtimeapi.ReleaseBody{Token: grant})
		m, merr := rt.Client.Run(ctx, runID)
		if res != nil {
			// what step 6 published, read back once the release is done
			ckpt = jobCheckpoint(ctx, rt, res, m)
		}
		released = merr == nil && !m.Lifecycle.ResourcesReleased.IsZero()
		// The claim's token must be refused now: an exec with it is 404
		// (no such claim) or 409 (fenced).
		_, xerr := rt.Client.Exec(ctx, runID, runtimeapi.ExecBody{Token: grant, Argv: []string{"true"}})
		var api *runtimeapi.APIError
		refused = errors.As(xerr, &api) && (api.Status == http.StatusNotFound || api.Status == http.StatusConflict)
		switch {
		case released:
			detail = fmt.Sprintf("the runtime released run %s at %s", runID, m.Lifecycle.ResourcesReleased.UTC().Format(time.RFC3339Nano))
		case merr != nil:
			detail = fmt.Sprintf("the run's manifest could not be read: %v (release: %v)", merr, rerr)
		default:
			detail = fmt.Sprintf("run %s is not released (release: %v)", runID, rerr)
		}
	}
	step(func(j *controlapi.Job, c *controlapi.Cancellation) {
		if released {
			addStep(c, controlapi.StepEndWork, controlapi.StepDone, "the sandbox's processes are gone: "+detail)
		} else {
			addStep(c, controlapi.StepEndWork, controlapi.StepFailed, detail)
		}
		if !c.Settled(controlapi.StepReconcileDeliveries) {
			addStep(c, controlapi.StepReconcileDeliveries, controlapi.StepDone, "output events already appended are delivered in order; the result (canceled) is delivered or ends 'notification failed'")
		}
		if !c.Settled(controlapi.StepCheckpoint) {
			if ckDetail == "" {
				ckDetail = "no sandbox to checkpoint: " + detail
			}
			addStep(c, controlapi.StepCheckpoint, ckOutcome, ckDetail)
			if ckpt != nil {
				c.Steps[len(c.Steps)-1].Checkpoint = ckpt.ID
				j.Checkpoint = ckpt
			}
		}
		if !c.Settled(controlapi.StepCleanupHooks) {
			addStep(c, controlapi.StepCleanupHooks, controlapi.StepNotApplicable, "no cleanup hooks are configured")
		}
	})
	e.failpoint(ctx, "cancel.released")
	_, err := e.Finish(ctx, id, func(j *controlapi.Job, l *lease) error {
		c := j.Cancellation
		if c == nil {
			c = &controlapi.Cancellation{Fence: 1, RequestedAt: time.Now().UTC()}
			j.Cancellation = c
		}
		now := time.Now().UTC()
		if refused {
			addStep(c, controlapi.StepRevoke, controlapi.StepDone, "the runtime refuses the claim's token (the credential went with the claim)")
		} else {
			addStep(c, controlapi.StepRevoke, controlapi.StepFailed, "the runtime still accepts the claim's token")
		}
		if released {
			addStep(c, controlapi.StepDeleteSandbox, controlapi.StepDone, "sandbox "+j.SandboxID+" deleted: "+detail)
		} else {
			addStep(c, controlapi.StepDeleteSandbox, controlapi.StepFailed, detail)
		}
		l.Owner, l.Until = "", time.Time{}
		if released && refused {
			addStep(c, controlapi.StepFinal, controlapi.StepDone, "every effect observed")
			j.State, j.Reason, j.EndedAt = controlapi.Canceled, "canceled", tp(now)
			j.Detail = "the sandbox is gone and the claim's token is refused"
			j.Owner, j.OwnerDeadline = "", nil
			l.Grant = ""
			return nil
		}
		addStep(c, controlapi.StepFinal, controlapi.StepFailed, "cleanup incomplete")
		j.State, j.Reason = controlapi.Canceling, "cleanup_incomplete"
		j.Detail = "canceled, cleanup incomplete: " + detail
		j.Owner, j.OwnerDeadline = "operator", tp(now.Add(24*time.Hour))
		// the recoverer tries again once this short lease runs out
		l.Owner, l.Until = e.c.ID, now.Add(e.c.Lease)
		return nil
	})
	if err != nil {
		e.c.Logger.Error("commit cancellation", "job_id", id, "err", err)
	}
}

// discoverClaim finds the claim a job canceled while claiming may have
// made: the runtimes are asked for a run with the job's request key; an
// open one is adopted (a claim with the same key answers its grant) so it
// can be released. It returns the run and its token, or "" and why not
// ("" and "" when no claim exists).
func (e *Engine) discoverClaim(ctx context.Context, id string, rt *Runtime) (runID, grant, why string) {
	j, err := e.st.Get(ctx, "", id)
	if err != nil {
		return "", "", fmt.Sprintf("job %s: %v", id, err)
	}
	if j.RequestKey == "" {
		return "", "", ""
	}
	for _, r := range e.c.Runtimes[j.Pool] {
		ids, err := r.Client.Query(ctx, runmanifest.Query{RequestKey: j.RequestKey})
		if err != nil {
			return "", "", fmt.Sprintf("runtime %s: runs with request key %s: %v", r.Name, j.RequestKey, err)
		}
		if len(ids) == 0 {
			continue
		}
		g, err := r.Client.Claim(ctx, j.Pool, runtimeapi.ClaimBody{Tenant: j.Tenant, SessionID: j.ID, RequestKey: j.RequestKey, ControlPlane: e.self})
		if err != nil {
			// ended already (the key is refused): nothing left to release
			var api *runtimeapi.APIError
			if errors.As(err, &api) && api.Status == http.StatusConflict {
				*rt = r
				return ids[0], "", ""
			}
			return "", "", fmt.Sprintf("runtime %s: adopting run %s: %v", r.Name, ids[0], err)
		}
		*rt = r
		_, _ = e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
			j.RunID, j.SandboxID, j.Runtime, j.Adopted = g.RunID, g.SandboxID, r.Name, true
			return nil
		})
		return g.RunID, g.Token, ""
	}
	return "", "", ""
}
