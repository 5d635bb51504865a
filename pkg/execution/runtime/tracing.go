package runtime

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// The runtime's part of a trace. A request's traceparent header (the
// control plane's claim, command or release span) is the parent of the
// runtime's spans for it:
//
//	runtime claim       the claim, from the request to the grant
//	  sandbox ready     a sandbox taken (warm or cold) until its runner answered
//	  credential issue  the claim's credential issued and placed
//	  runner awake      the grant until the runner read the claim's first command (runner's clock)
//	runtime command     one command, from the request to its exit
//	  runner exec       the command in the runner, read to exit (runner's clock);
//	                    its span id is the parent in the workload's TRACEPARENT
//	    runner start    read to the command's process started
//	runtime release     revoke, delete, manifest completed
//
// Every span carries run_id, session_id, allocation_attempt and
// sandbox_id once they are known. The spans go to the Tracing's ring
// (GET /v1/traces/{id}) and over OTLP when it exports.

// WithTracing records the runtime's spans with t (default: none; requests'
// trace context still reaches the workload's TRACEPARENT).
func WithTracing(t *telemetry.Tracing) RuntimeOption {
	return func(o *runtimeOptions) { o.tracing = t }
}

var noopTracer = noop.NewTracerProvider().Tracer("")

func (r *Runtime) tracer() trace.Tracer {
	if r.o.tracing == nil {
		return noopTracer
	}
	return r.o.tracing.Tracer()
}

// ids are claim c's correlation ids, as span attributes.
func (c *claim) ids() []attribute.KeyValue {
	c.mu.Lock()
	defer c.mu.Unlock()
	kv := []attribute.KeyValue{attribute.String("run_id", c.runID), attribute.String("pool", c.pool), attribute.String("session_id", c.sessionID),
		attribute.Int("allocation_attempt", c.attempt)}
	if c.sandbox != nil {
		kv = append(kv, attribute.String("sandbox_id", c.sandbox.ID))
	}
	return kv
}

// endSpan ends s, recording err as its status.
func endSpan(s trace.Span, err error, kv ...attribute.KeyValue) {
	s.SetAttributes(kv...)
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// runnerSpans records the runner's own part of a command from its timing
// (st.Timing; nothing when the runner sent none): runner exec with span
// id sid (the one the workload got in TRACEPARENT), runner start under it,
// and, for the claim's first command, runner awake under the claim's span.
func (r *Runtime) runnerSpans(ctx context.Context, c *claim, sid trace.SpanID, st *runner.ExitStatus, first bool) {
	if r.o.tracing == nil || st == nil || st.Timing == nil || st.Timing.Received.IsZero() {
		return
	}
	tm := st.Timing
	ids := trace.WithAttributes(c.ids()...)
	if first {
		c.mu.Lock()
		granted, parent := c.granted, c.span
		c.mu.Unlock()
		if !granted.IsZero() && parent.IsValid() {
			_, s := r.tracer().Start(trace.ContextWithSpanContext(ctx, parent), "runner awake", trace.WithTimestamp(granted), ids)
			s.End(trace.WithTimestamp(tm.Received))
		}
	}
	if !sid.IsValid() {
		return
	}
	end := tm.Exited
	if end.IsZero() {
		end = time.Now()
	}
	xctx, x := r.o.tracing.StartWithID(ctx, sid, "runner exec", trace.WithTimestamp(tm.Received), ids,
		trace.WithAttributes(attribute.Int("exit_code", st.ExitCode)))
	if !tm.Started.IsZero() {
		_, s := r.tracer().Start(xctx, "runner start", trace.WithTimestamp(tm.Received), ids)
		s.End(trace.WithTimestamp(tm.Started))
	}
	x.End(trace.WithTimestamp(end))
}

// childTraceParent is the traceparent of a new span under the span in ctx
// (the runner exec span, recorded later under that id), and the id; ""
// when ctx holds no valid span context.
func childTraceParent(ctx context.Context) (string, trace.SpanID) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", trace.SpanID{}
	}
	sid := telemetry.NewSpanID()
	return telemetry.TraceParentOf(sc.WithSpanID(sid).WithRemote(false)), sid
}

// withTraceContext makes a request's traceparent header the parent of the
// spans its handler starts.
func withTraceContext(r *http.Request) *http.Request {
	if r.Header.Get(runtimeapi.HeaderTraceParent) == "" {
		return r
	}
	return r.WithContext(telemetry.FromHeader(r.Context(), r.Header))
}

// traces serves GET /v1/traces/{id}: the spans of the trace the runtime's
// ring holds.
func (s *Server) traces(w http.ResponseWriter, r *http.Request) {
	id, err := trace.TraceIDFromHex(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, fmt.Errorf("trace id %.70q: want 32 hex digits, not all zero", r.PathValue("id")))
		return
	}
	out := runtimeapi.TraceResult{TraceID: id.String(), Spans: []runtimeapi.Span{}}
	if s.rt != nil && s.rt.o.tracing != nil {
		t := s.rt.o.tracing
		for _, sp := range t.Ring().Trace(id) {
			out.Spans = append(out.Spans, runtimeapi.Span(sp))
		}
	}
	writeJSON(w, http.StatusOK, out)
}
