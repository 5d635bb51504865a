package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// dispatch works one admitted job: claim a sandbox (with the job's request
// key, so a retry after a crash adopts the sandbox an earlier attempt
// created), run its commands within the deadline, release, and commit the
// outcome. Each state is committed before its effect. An error asks River
// to retry (a dispatch failure within the budget); every other outcome is
// recorded on the job and returns nil.
func (e *Engine) dispatch(ctx context.Context, id string, attempt, maxAttempts int) error {
	now := time.Now()
	j, err := e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
		if j.State != controlapi.Admitted || (l.Owner != "" && l.Owner != e.c.ID && l.Until.After(now)) {
			return errSkip // another delivery of the same job, or already past
		}
		if j.CancelRequested {
			if j.Cancellation == nil {
				j.Cancellation = &controlapi.Cancellation{Fence: 1, RequestedAt: now.UTC()}
			}
			cancelQueued(j, now)
			return nil
		}
		if j.DeadlineAt != nil && now.After(*j.DeadlineAt) {
			j.State, j.Reason, j.EndedAt = controlapi.DeadlineExceeded, "deadline", tp(now)
			j.Detail = "the deadline passed before a sandbox was allocated"
			return nil
		}
		if j.RequestKey == "" {
			j.Attempt++
			j.RequestKey = fmt.Sprintf("%s.a%d", j.ID, j.Attempt)
		}
		j.State, j.Reason, j.Detail, j.Replica = controlapi.Allocating, "claiming", "request key "+j.RequestKey, e.c.ID
		l.Owner, l.Until = e.c.ID, now.Add(e.c.Lease)
		return nil
	})
	if err == nil && j != nil && j.State.Terminal() {
		e.JobEnded(ctx, nil, j)
	}
	if err != nil || j == nil || j.State != controlapi.Allocating {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	defer e.wake() // a slot frees whatever happens
	if j.DispatchFailures == 0 {
		e.TraceAdmission(ctx, j)
	}

	rt, g, err := e.tracedClaim(ctx, j)
	if err != nil {
		return e.dispatchFailed(ctx, j, err, attempt, maxAttempts)
	}
	e.failpoint(ctx, "after-claim")
	j, err = e.st.Update(ctx, id, func(j *controlapi.Job, l *lease) error {
		if l.Owner != e.c.ID {
			return fmt.Errorf("%w: job %s: lease lost to %s", store.ErrConflict, id, l.Owner)
		}
		if j.State != controlapi.Canceling { // a cancel that came during the claim keeps the job canceling
			j.State, j.Reason, j.Detail = controlapi.Running, "running", fmt.Sprintf("run %s in sandbox %s on %s", g.RunID, g.SandboxID, rt.Name)
		}
		j.Runtime, j.RunID, j.SandboxID, j.Generation, j.Adopted = rt.Name, g.RunID, g.SandboxID, g.Generation, g.Adopted
		j.StartedAt = tp(time.Now())
		l.Grant, l.Until = g.Token, time.Now().Add(e.c.Lease)
		return nil
	})
	if err != nil {
		// The claim exists but the job cannot say so: release it, and let
		// the recoverer find the job by its lease.
		_ = rt.Client.Release(context.WithoutCancel(ctx), g.RunID, runtimeapi.ReleaseBody{Token: g.Token})
		return err
	}
	if j.State == controlapi.Canceling { // canceled while it was claiming: no command runs
		e.completeCancel(ctx, id, rt, g.RunID, g.Token, "no command had started")
		e.cancelEnded(ctx, rt, id)
		return nil
	}
	e.c.Logger.Info("job running", logIDs(j)...)
	e.run(ctx, rt, g, j)
	return nil
}

// cancelEnded tells telemetry of a cancellation that ended the job.
func (e *Engine) cancelEnded(ctx context.Context, rt Runtime, id string) {
	if jf, err := e.st.Get(context.WithoutCancel(ctx), "", id); err == nil && jf.State.Terminal() {
		e.JobEnded(ctx, &rt, jf)
	}
}

// claim asks the pool's runtimes, in turn, for a sandbox.
func (e *Engine) claim(ctx context.Context, j *controlapi.Job) (Runtime, *runtimeapi.Grant, error) {
	rts := e.c.Runtimes[j.Pool]
	if len(rts) == 0 {
		return Runtime{}, nil, fmt.Errorf("no runtime serves pool %s", j.Pool)
	}
	v, _ := e.rr.LoadOrStore(j.Pool, new(atomic.Int64))
	start := int(v.(*atomic.Int64).Add(1))
	var errs []error
	for i := range rts {
		rt := rts[(start+i)%len(rts)]
		g, err := e.claimFrom(ctx, rt, j)
		if err == nil {
			return rt, g, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", rt.Name, err))
	}
	return Runtime{}, nil, errors.Join(errs...)
}

// maxDrainingRetries bounds how often one claim is asked again of a
// runtime whose replica answered that it is draining or stale.
const maxDrainingRetries = 20

// claimFrom asks rt for the job's sandbox. A replica that is stopping
// answers 503 draining before it records anything: the claim is asked
// again, with the same request key, after its Retry-After (the runtime's
// Service routes the new connection to a replica that is not stopping),
// without counting as a dispatch failure. So is a claim answered 503
// stale, equally before anything is recorded: the replica's view of the
// config repository is too old, or older than the cluster's (it routed
// the claim to a generation a rollout drained since), and it reads the
// repository again.
func (e *Engine) claimFrom(ctx context.Context, rt Runtime, j *controlapi.Job) (*runtimeapi.Grant, error) {
	for try := 0; ; try++ {
		remaining := time.Until(*j.DeadlineAt)
		cctx, cancel := context.WithTimeout(ctx, remaining)
		g, err := rt.Client.Claim(cctx, j.Pool, runtimeapi.ClaimBody{Tenant: j.Tenant, SessionID: j.ID, DeadlineSeconds: remaining.Seconds(), RequestKey: j.RequestKey, ControlPlane: e.self})
		cancel()
		var api *runtimeapi.APIError
		if err == nil || !errors.As(err, &api) || (api.Code != runtimeapi.CodeDraining && api.Code != runtimeapi.CodeStale) || try >= maxDrainingRetries {
			return g, err
		}
		wait := min(max(api.RetryAfter, 200*time.Millisecond), 5*time.Second)
		if time.Until(*j.DeadlineAt) <= wait {
			return nil, err
		}
		e.c.Logger.Info("runtime replica "+api.Code+": claim asked again", append(logIDs(j), "runtime", rt.Name, "after", wait.String())...)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// dispatchFailed records a failed claim: back to admitted for River's
// retry while the budget lasts, failed with the reason when it is spent.
// A key the runtime already released means an earlier attempt ran: the job
// ends unknown rather than running twice.
func (e *Engine) dispatchFailed(ctx context.Context, j *controlapi.Job, cause error, attempt, maxAttempts int) error {
	var api *runtimeapi.APIError
	released := errors.As(cause, &api) && api.Status == http.StatusConflict && strings.Contains(api.Reason, "request key already used")
	last := attempt >= maxAttempts
	jf, err := e.st.Update(context.WithoutCancel(ctx), j.ID, func(j *controlapi.Job, l *lease) error {
		now := time.Now().UTC()
		j.DispatchFailures++
		l.Owner, l.Until = "", time.Time{}
		switch {
		case released:
			j.State, j.Reason, j.Owner, j.OwnerDeadline = controlapi.Unknown, "claim_released", "operator", tp(now.Add(24*time.Hour))
			j.Detail = fmt.Sprintf("the runtime says request key %s was already claimed and released: an earlier attempt may have run; not run again: %v", j.RequestKey, cause)
		case last:
			j.State, j.Reason, j.EndedAt = controlapi.Failed, "dispatch_budget", tp(now)
			j.Detail = fmt.Sprintf("dispatch failed %d times, the retry budget: %v", j.DispatchFailures, cause)
		default:
			j.State, j.Reason = controlapi.Admitted, "dispatch_retry"
			j.Detail = fmt.Sprintf("dispatch attempt %d of %d failed: %v; River retries with backoff", attempt, maxAttempts, cause)
			l.DispatchDue = now.Add(dispatchGrace + 30*time.Second)
			j.Notes = append(j.Notes, controlapi.Note{At: now, Text: j.Detail})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if released || last {
		if jf != nil {
			e.JobEnded(ctx, nil, jf)
		}
		return nil
	}
	return cause
}

// run runs the job's commands in its sandbox, then releases it and commits
// the outcome.
func (e *Engine) run(ctx context.Context, rt Runtime, g *runtimeapi.Grant, j *controlapi.Job) {
	out := newBoundedOutput(j.Limits.MaxOutputBytes, j.Limits.MaxOutputLines)
	outs := e.newOutputStream(j) // the job's events: output as produced (internal/stream)
	deadline := *j.DeadlineAt
	// The owner's heartbeat keeps the lease, and watches for a cancel, a
	// budget stop or a lost lease.
	hctx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHB()
	execCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abort(nil)
	go e.heartbeat(hctx, j, abort)
	// a cancel made on this replica stops the commands at once (others
	// reach the owner at its next heartbeat)
	e.aborts.Store(j.ID, abort)
	defer e.aborts.Delete(j.ID)

	final := controlapi.Succeeded
	reason, detail, stop := "exit_code", "every command exited 0", ""
	var results []controlapi.CommandResult
	var exit *int
	for i, argv := range j.Commands {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			final, reason, detail = controlapi.DeadlineExceeded, "deadline", fmt.Sprintf("the deadline passed before command %d", i+1)
			break
		}
		timeout := min(time.Duration(j.Limits.CommandTimeout), remaining)
		fmt.Fprintf(out, "$ %s\n", shellLine(argv))
		outs.Command(i, argv)
		start := time.Now()
		// streamed: the output reaches the job's events as it is produced;
		// the bounded output keeps its head and tail
		cmdTP, endSpan := e.tracedSpan(ctx, j, "command", attribute.Int("command", i+1))
		res, err := rt.Client.ExecStreamEvents(runtimeapi.WithTraceParent(execCtx, cmdTP), g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: argv, TimeoutSeconds: timeout.Seconds(),
			GraceSeconds: e.c.Grace.Seconds()}, func(stream string, b []byte) { out.Write(b); outs.Append(i, stream, b) },
			func(ev runtimeapi.WorkloadEvent) {
				if ev.Kind != "payload_fetched" { // the runner's, a stamp only
					outs.Event(i, ev.Kind, ev.At, ev.Data)
				}
			})
		endSpan(err, commandAttrs(res)...)
		cr := controlapi.CommandResult{Argv: argv, Seconds: time.Since(start).Seconds()}
		if err != nil {
			exit = nil // not confirmed: never an earlier command's code
			results = append(results, cr)
			if cause := context.Cause(execCtx); cause != nil {
				final, reason, detail, stop = stopState(cause), stopReason(cause), fmt.Sprintf("command %d stopped: %v", i+1, cause), "signalled"
			} else {
				final, reason = controlapi.Unknown, "exec_unconfirmed"
				detail = fmt.Sprintf("command %d: the runtime's answer was lost (%v); whether it ran is not known", i+1, err)
			}
			break
		}
		code := res.ExitCode
		cr.ExitCode, cr.TimedOut, cr.Stop, cr.Outcome, cr.EventsRejected = &code, res.TimedOut, res.Stop, res.Outcome, res.EventsRejected
		outs.Rejected(i, res.EventsRejected)
		results = append(results, cr)
		exit = &code
		if res.Outcome != "" {
			final, reason, detail = controlapi.Failed, res.Outcome, fmt.Sprintf("command %d hit a limit of its sandbox: %s (exit %d)", i+1, res.Outcome, code)
			break
		}
		if res.TimedOut {
			stop = res.Stop
			if !time.Now().Before(deadline.Add(-50 * time.Millisecond)) {
				final, reason, detail = controlapi.DeadlineExceeded, "deadline", fmt.Sprintf("command %d was stopped at the job's deadline (%s)", i+1, orWord(res.Stop, "stopped"))
			} else {
				final, reason, detail = controlapi.Failed, "command_timeout", fmt.Sprintf("command %d exceeded its timeout %s (%s)", i+1, timeout, orWord(res.Stop, "stopped"))
			}
			break
		}
		if code != 0 {
			final, reason, detail = controlapi.Failed, "exit_code", fmt.Sprintf("command %d exited %d", i+1, code)
			break
		}
	}
	stopHB()
	outs.Close()
	// the post-run step is done: every output and event of the job is
	// committed to its stream, for delivery (post_hook_complete)
	postHook := time.Now().UTC()
	if final == controlapi.Canceled {
		// The cancellation protocol: record what ran, then release and
		// observe the effects before the job may say canceled.
		ended := time.Now().UTC()
		if _, err := e.st.Update(context.WithoutCancel(ctx), j.ID, func(j *controlapi.Job, l *lease) error {
			j.Results, j.ExitCode, j.StopOutcome = results, exit, stop
			j.Output, j.OutputDroppedBytes, j.OutputDroppedLines = out.String(), out.DroppedBytes, out.DroppedLines
			if j.Cost.Known && j.StartedAt != nil {
				j.Cost.Amount = ended.Sub(*j.StartedAt).Hours() * j.Cost.RatePerHour
			}
			return nil
		}); err != nil {
			e.c.Logger.Error("commit canceled job's output", append(logIDs(j), "err", err)...)
		}
		e.completeCancel(ctx, j.ID, rt, g.RunID, g.Token, "the command's exec was cancelled: the runtime sent SIGTERM to its process group, then SIGKILL after the grace")
		e.cancelEnded(ctx, rt, j.ID)
		return
	}
	// Release whatever happened; the exit code says what the runtime may
	// record.
	relTP, endSpan := e.tracedSpan(ctx, j, "release")
	rerr := rt.Client.Release(runtimeapi.WithTraceParent(context.WithoutCancel(ctx), relTP), g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: exit, PostHookComplete: &postHook})
	endSpan(rerr)
	ended := time.Now().UTC()
	jf, err := e.Finish(context.WithoutCancel(ctx), j.ID, func(j *controlapi.Job, l *lease) error {
		if l.Owner != e.c.ID {
			return fmt.Errorf("%w: job %s: lease lost to %s", store.ErrConflict, j.ID, l.Owner)
		}
		j.Results, j.ExitCode, j.StopOutcome = results, exit, stop
		j.Output, j.OutputDroppedBytes, j.OutputDroppedLines = out.String(), out.DroppedBytes, out.DroppedLines
		j.State, j.Reason, j.Detail = final, reason, detail
		if rerr != nil {
			j.Notes = append(j.Notes, controlapi.Note{At: ended, Text: fmt.Sprintf("release of run %s failed: %v", g.RunID, rerr)})
		}
		if final == controlapi.Unknown {
			j.Owner, j.OwnerDeadline = "operator", tp(ended.Add(24*time.Hour))
		} else {
			j.EndedAt = tp(ended)
		}
		if j.Cost.Known && j.StartedAt != nil {
			j.Cost.Amount = ended.Sub(*j.StartedAt).Hours() * j.Cost.RatePerHour
		}
		l.Owner, l.Until, l.Grant = "", time.Time{}, ""
		return nil
	})
	if err != nil {
		e.c.Logger.Error("commit job outcome", append(logIDs(j), "err", err)...)
		return
	}
	e.JobEnded(ctx, &rt, jf)
}

func orWord(s, w string) string {
	if s == "" {
		return w
	}
	return s
}

// Stop causes of a running job.
var (
	errCanceled  = errors.New("canceled")
	errBudget    = errors.New("the tenant's budget is spent")
	errLeaseLost = errors.New("this control plane lost the job's lease")
)

func stopState(cause error) controlapi.State {
	switch {
	case errors.Is(cause, errCanceled):
		return controlapi.Canceled
	case errors.Is(cause, errBudget):
		return controlapi.Failed
	}
	return controlapi.Unknown
}

func stopReason(cause error) string {
	switch {
	case errors.Is(cause, errCanceled):
		return "canceled"
	case errors.Is(cause, errBudget):
		return "budget"
	}
	return "lease_lost"
}

// heartbeat extends the lease every third of it and stops the job's
// commands (abort) on a cancel, a spent budget or a lost lease.
func (e *Engine) heartbeat(ctx context.Context, j *controlapi.Job, abort context.CancelCauseFunc) {
	t := time.NewTicker(e.c.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := e.st.Heartbeat(ctx, j.ID, e.c.ID, time.Now().Add(e.c.Lease))
		if err != nil {
			continue // the database is away: the lease may lapse, the job goes on
		}
		if !ok {
			abort(errLeaseLost)
			return
		}
		cur, err := e.st.Get(ctx, "", j.ID)
		if err != nil {
			continue
		}
		if cur.CancelRequested {
			abort(errCanceled)
			return
		}
		if over, _ := e.overBudget(ctx, cur); over {
			abort(errBudget)
			return
		}
	}
}

// overBudget says a running job has taken its tenant past the budget in
// effect now (which may have been lowered since admission).
func (e *Engine) overBudget(ctx context.Context, j *controlapi.Job) (bool, error) {
	if !j.Cost.Known || j.StartedAt == nil {
		return false, nil
	}
	cfg, err := e.c.Config.Current(ctx)
	if err != nil {
		return false, err
	}
	t, ok := cfg.Tenants[j.Tenant]
	if !ok || t.Value.Budget == nil {
		return false, nil
	}
	us, err := e.st.Usage(ctx)
	if err != nil {
		return false, err
	}
	accrued := time.Since(*j.StartedAt).Hours() * j.Cost.RatePerHour
	for _, u := range us {
		if u.Tenant == j.Tenant {
			return u.Spent+accrued > t.Value.Budget.Amount, nil
		}
	}
	return false, nil
}

// shellLine writes argv as a shell would read it back, for the output.
func shellLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
