package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

func (e *Engine) recoverLoop(ctx context.Context) {
	every := min(e.c.Lease/3, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := e.recoverOnce(ctx); err != nil && ctx.Err() == nil {
			e.c.Logger.Warn("recover", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recoverOnce takes over the jobs whose owner died (its lease ran out):
//   - admitted, dispatch overdue: handed to River again;
//   - allocating: back to admitted with the same request key, so the claim
//     adopts the sandbox the dead owner may have created;
//   - running: its commands may have run, so they are never run again: the
//     sandbox is released and the job ends canceled (a cancel was asked)
//     or unknown, with an owner and a deadline.
func (e *Engine) recoverOnce(ctx context.Context) error {
	ids, err := e.st.Orphans(ctx, time.Now(), 100)
	if err != nil {
		return err
	}
	var redispatch []string
	for _, id := range ids {
		var grant, cancelGrant, runID, rtName string
		j, err := e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
			now := time.Now().UTC()
			if l.Owner != "" && l.Until.After(now) {
				return errSkip
			}
			lost := l.Owner
			switch j.State {
			case controlapi.Admitted:
				if l.DispatchDue.After(now) {
					return errSkip
				}
				l.DispatchDue = now.Add(dispatchGrace)
				j.Notes = append(j.Notes, controlapi.Note{At: now, Text: "dispatch overdue: handed to the queue again"})
			case controlapi.Allocating:
				j.State, j.Reason = controlapi.Admitted, "owner_lost"
				j.Detail = fmt.Sprintf("owner %s stopped while claiming; the claim is retried with request key %s, adopting the sandbox if the runtime made one", lost, j.RequestKey)
				l.Owner, l.Until, l.DispatchDue = "", time.Time{}, now.Add(dispatchGrace)
			case controlapi.Canceling:
				// its owner died mid-cancellation (or its cleanup was
				// incomplete): carry it on from what is recorded
				cancelGrant, runID, rtName = l.Grant, j.RunID, j.Runtime
				l.Owner, l.Until = e.c.ID, now.Add(e.c.Lease)
				j.Notes = append(j.Notes, controlapi.Note{At: now, Text: fmt.Sprintf("cancellation taken over from %s", orWord(lost, "nobody"))})
			case controlapi.Running:
				grant, runID, rtName = l.Grant, j.RunID, j.Runtime
				if j.CancelRequested {
					cancelGrant, grant = grant, ""
					j.State, j.Reason = controlapi.Canceling, "canceling"
					j.Detail = fmt.Sprintf("owner %s stopped while the job ran; the cancellation is carried on", lost)
					l.Owner, l.Until = e.c.ID, now.Add(e.c.Lease)
				} else {
					j.State, j.Reason, j.Owner, j.OwnerDeadline = controlapi.Unknown, "owner_lost", "operator", tp(now.Add(24*time.Hour))
					j.Detail = fmt.Sprintf("owner %s stopped while run %s was running in sandbox %s; its commands are never run again and their outcome was not observed", lost, j.RunID, j.SandboxID)
				}
				l.Owner, l.Until, l.Grant = "", time.Time{}, ""
			default:
				return errSkip
			}
			return nil
		})
		if err != nil || j == nil {
			continue
		}
		if j.State == controlapi.Admitted {
			redispatch = append(redispatch, id)
		}
		if grant != "" {
			e.releaseLost(ctx, id, rtName, runID, grant)
		}
		if j.State == controlapi.Canceling {
			rt := e.runtimeNamed(rtName)
			e.completeCancel(ctx, id, rt, runID, cancelGrant, "the owner was gone: the runtime's release ends the command's processes")
			e.cancelEnded(ctx, rt, id)
			continue
		}
		if j.State == controlapi.Unknown || j.State.Terminal() {
			e.JobEnded(ctx, nil, j)
		}
	}
	if len(redispatch) > 0 && !e.c.NoDispatch {
		e.wake()
		return e.q.insertMany(ctx, redispatch)
	}
	return nil
}

// releaseLost releases the sandbox of a job whose owner died, and notes
// whether the runtime confirmed it.
func (e *Engine) releaseLost(ctx context.Context, id, rtName, runID, grant string) {
	err := fmt.Errorf("runtime %s is not configured", rtName)
	if rt := e.runtimeNamed(rtName); rt.Client != nil {
		err = rt.Client.Release(ctx, runID, runtimeapi.ReleaseBody{Token: grant})
	}
	text := fmt.Sprintf("run %s released by the recoverer", runID)
	if err != nil {
		text = fmt.Sprintf("release of run %s by the recoverer failed: %v", runID, err)
	}
	_, _ = e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
		j.Notes = append(j.Notes, controlapi.Note{At: time.Now().UTC(), Text: text})
		return nil
	})
}

// runtimeNamed is the configured runtime of that name (zero if none).
func (e *Engine) runtimeNamed(name string) Runtime {
	for _, rts := range e.c.Runtimes {
		for _, rt := range rts {
			if rt.Name == name {
				return rt
			}
		}
	}
	return Runtime{}
}
