package jobs

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// A job's trace: its root span "job" (submission to end, written when the
// job ends), and under it admission (queued to admitted), dispatch wait
// (admitted to a worker taking it), claim, each command, and release. The
// runtime's requests carry each span's traceparent, so the runtime's spans
// (runtime claim with sandbox ready, credential issue and runner awake
// under it; runtime command with the runner's exec; runtime release) are
// their children, in the runtime's ring; Trace merges them in. Every span
// of the control plane carries job_id and, once known,
// run_id, session_id (the claim's session: the job id), allocation_attempt
// and sandbox_id; the control plane's log lines about the job carry the
// same.

// Trace returns job j's trace: what this replica's ring holds, merged
// with the spans the runtime that served the job holds of it (GET
// /v1/traces/{id}: its claim, commands, release and its runner's part),
// asked within traceAskTimeout. A runtime that does not answer leaves its
// spans out and JobTrace.RuntimeError says so.
func (e *Engine) Trace(ctx context.Context, j *controlapi.Job) *controlapi.JobTrace {
	id := telemetry.JobTraceID(j.ID)
	recs := e.c.Tracing.Ring().Trace(id)
	spans := make([]controlapi.Span, 0, len(recs))
	for _, r := range recs {
		spans = append(spans, controlapi.Span(r))
	}
	out := &controlapi.JobTrace{JobID: j.ID, TraceID: id.String(), Replica: e.c.ID}
	if rt := e.runtimeNamed(j.Runtime); j.Runtime != "" && rt.Client != nil {
		out.Runtime = rt.Name
		actx, cancel := context.WithTimeout(ctx, traceAskTimeout)
		got, err := rt.Client.Trace(actx, id.String())
		cancel()
		if err != nil {
			// the error names the runtime's address: the log has it
			out.RuntimeError = "the runtime did not answer for its spans"
			e.c.Logger.Warn("runtime spans for the job's trace", append(logIDs(j), "runtime", rt.Name, "err", err)...)
		} else {
			seen := make(map[string]bool, len(spans))
			for _, s := range spans {
				seen[s.SpanID] = true
			}
			for _, s := range got.Spans {
				if s.TraceID == out.TraceID && !seen[s.SpanID] {
					spans = append(spans, controlapi.Span(s))
				}
			}
			slices.SortStableFunc(spans, func(a, b controlapi.Span) int {
				if c := a.Start.Compare(b.Start); c != 0 {
					return c
				}
				return b.End.Compare(a.End)
			})
		}
	}
	out.Spans = spans
	return out
}

// traceAskTimeout bounds the question Trace asks the runtime.
const traceAskTimeout = 3 * time.Second

// jobIDs are the correlation ids of a job, as span attributes.
func jobIDs(j *controlapi.Job) []attribute.KeyValue {
	kv := []attribute.KeyValue{attribute.String("job_id", j.ID), attribute.String("pool", j.Pool)}
	if j.Attempt > 0 {
		kv = append(kv, attribute.Int("allocation_attempt", j.Attempt))
	}
	if j.RunID != "" {
		kv = append(kv, attribute.String("run_id", j.RunID), attribute.String("session_id", j.ID), attribute.String("sandbox_id", j.SandboxID))
	}
	return kv
}

// logIDs are the same ids for a log line, with the trace id.
func logIDs(j *controlapi.Job) []any {
	out := []any{"job_id", j.ID, "trace_id", telemetry.JobTraceID(j.ID).String()}
	for _, kv := range jobIDs(j)[2:] {
		out = append(out, string(kv.Key), kv.Value.AsInterface())
	}
	return out
}

func (e *Engine) tracer() trace.Tracer { return e.c.Tracing.Tracer() }

// TraceAdmission writes the spans of a job before its dispatch: admission
// (its submission to its admission) and dispatch wait (its admission to
// a worker taking it, now).
func (e *Engine) TraceAdmission(ctx context.Context, j *controlapi.Job) {
	if j.AdmittedAt == nil {
		return
	}
	jctx := telemetry.InJob(ctx, j.ID)
	_, s := e.tracer().Start(jctx, "admission", trace.WithTimestamp(j.CreatedAt), trace.WithAttributes(jobIDs(j)...))
	s.End(trace.WithTimestamp(*j.AdmittedAt))
	_, s = e.tracer().Start(jctx, "dispatch wait", trace.WithTimestamp(*j.AdmittedAt), trace.WithAttributes(jobIDs(j)...))
	s.End()
}

// tracedClaim is claim in a span.
func (e *Engine) tracedClaim(ctx context.Context, j *controlapi.Job) (Runtime, *runtimeapi.Grant, error) {
	sctx, s := e.tracer().Start(telemetry.InJob(ctx, j.ID), "claim", trace.WithAttributes(jobIDs(j)...), trace.WithAttributes(attribute.String("request_key", j.RequestKey)))
	defer s.End()
	// the runtime's spans of the claim are children of this one
	rt, g, err := e.claim(runtimeapi.WithTraceParent(ctx, telemetry.TraceParent(sctx)), j)
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
		e.c.Logger.Warn("claim failed", append(logIDs(j), "err", err)...)
		return rt, g, err
	}
	s.SetAttributes(attribute.String("run_id", g.RunID), attribute.String("session_id", j.ID), attribute.String("sandbox_id", g.SandboxID),
		attribute.Int("allocation_attempt", g.AllocationAttempt), attribute.String("runtime", rt.Name), attribute.Bool("warm", g.Warm), attribute.Bool("adopted", g.Adopted))
	return rt, g, nil
}

// Span starts a span of job j; its end function records err.
func (e *Engine) Span(ctx context.Context, j *controlapi.Job, name string, kv ...attribute.KeyValue) func(err error, kv ...attribute.KeyValue) {
	return SpanOf(e.c.Tracing)(ctx, j, name, kv...)
}

// tracedSpan is Span, with the traceparent of the span for the runtime's
// requests made in it (runtimeapi.WithTraceParent).
func (e *Engine) tracedSpan(ctx context.Context, j *controlapi.Job, name string, kv ...attribute.KeyValue) (string, func(err error, kv ...attribute.KeyValue)) {
	sctx, s := e.tracer().Start(telemetry.InJob(ctx, j.ID), name, trace.WithAttributes(jobIDs(j)...), trace.WithAttributes(kv...))
	return telemetry.TraceParent(sctx), func(err error, kv ...attribute.KeyValue) {
		s.SetAttributes(kv...)
		if err != nil {
			s.SetStatus(codes.Error, err.Error())
		}
		s.End()
	}
}

// SpanOf is Span on tr: for work on a job outside the engine (the output
// worker's deliveries), in the job's trace.
func SpanOf(tr *telemetry.Tracing) func(ctx context.Context, j *controlapi.Job, name string, kv ...attribute.KeyValue) func(err error, kv ...attribute.KeyValue) {
	return func(ctx context.Context, j *controlapi.Job, name string, kv ...attribute.KeyValue) func(err error, kv ...attribute.KeyValue) {
		_, s := tr.Tracer().Start(telemetry.InJob(ctx, j.ID), name, trace.WithAttributes(jobIDs(j)...), trace.WithAttributes(kv...))
		return func(err error, kv ...attribute.KeyValue) {
			s.SetAttributes(kv...)
			if err != nil {
				s.SetStatus(codes.Error, err.Error())
			}
			s.End()
		}
	}
}

// commandAttrs says how a command ended, for its span.
func commandAttrs(res *runtimeapi.ExecResult) []attribute.KeyValue {
	if res == nil {
		return nil
	}
	kv := []attribute.KeyValue{attribute.Int("exit_code", res.ExitCode)}
	if res.TimedOut {
		kv = append(kv, attribute.Bool("timed_out", true))
	}
	if res.Stop != "" {
		kv = append(kv, attribute.String("stop", res.Stop))
	}
	if res.Outcome != "" {
		kv = append(kv, attribute.String("outcome", res.Outcome))
	}
	return kv
}

// JobEnded records a job that reached an end (terminal, or unknown): its
// metrics (kit setup from its run manifest, when it had a run on rt), its
// root span, and a log line with its ids.
func (e *Engine) JobEnded(ctx context.Context, rt *Runtime, j *controlapi.Job) {
	if j == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	end := time.Now()
	if j.EndedAt != nil {
		end = *j.EndedAt
	}
	if rt != nil && j.RunID != "" {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := rt.Client.Run(mctx, j.RunID)
		cancel()
		if err == nil {
			e.traceLifecycle(ctx, j, m)
		} else {
			e.c.Logger.Warn("run manifest for the job's trace", append(logIDs(j), "err", err)...)
		}
	}
	var ran time.Duration
	if j.StartedAt != nil {
		ran = end.Sub(*j.StartedAt)
	}
	met := e.c.Metrics
	met.TaskEnded(ctx, j.Pool, j.State == controlapi.Succeeded, j.Reason, ran)
	if j.State.Terminal() {
		met.Cost(ctx, j.Pool, j.Cost.Known, j.Cost.Amount)
	}
	_, root := e.c.Tracing.StartJobRoot(ctx, j.ID, "job", trace.WithTimestamp(j.CreatedAt), trace.WithAttributes(jobIDs(j)...),
		trace.WithAttributes(attribute.String("tenant", j.Tenant), attribute.String("state", string(j.State)), attribute.String("reason", j.Reason)))
	if j.State != controlapi.Succeeded {
		root.SetStatus(codes.Error, j.Reason)
	}
	root.End(trace.WithTimestamp(end))
	e.c.Logger.Info("job ended", append(logIDs(j), "state", string(j.State), "reason", j.Reason)...)
}

// traceLifecycle records kit_setup_latency (the sandbox assigned to the
// runner's first command) from the run manifest's lifecycle. The spans of
// those steps (sandbox ready, runner awake) are the runtime's own now: it
// records them under the claim's span, and Trace merges them in.
func (e *Engine) traceLifecycle(ctx context.Context, j *controlapi.Job, m *runmanifest.Manifest) {
	l := m.Lifecycle
	if !l.SandboxAssigned.IsZero() && !l.RunnerAwakened.IsZero() {
		e.c.Metrics.KitSetup(ctx, j.Pool, m.Warm, l.RunnerAwakened.Sub(l.SandboxAssigned))
	}
}
