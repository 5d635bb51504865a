package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C trace context across processes: the control plane formats its
// span's context as a traceparent for the runtime's API, the runtime reads
// it back as the parent of its spans and passes a child's to the runner,
// which hands it to the workload as TRACEPARENT.

var w3c = propagation.TraceContext{}

// TraceParent formats the span context in ctx as a W3C traceparent; ""
// when ctx holds no valid one.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// TraceParentOf formats sc as a W3C traceparent; "" when it is not valid.
func TraceParentOf(sc trace.SpanContext) string {
	return TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
}

// FromTraceParent returns ctx whose new spans are children of the remote
// span traceparent names; ctx as it is when traceparent is empty or
// malformed.
func FromTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// FromHeader is FromTraceParent on an HTTP request's traceparent header.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

type spanIDKey struct{}

// WithSpanID returns ctx whose next span a Tracing starts gets span id
// sid: for a span whose id must be known before it starts (it is handed
// to another process as the parent of its spans), recorded later with
// its own timestamps.
func WithSpanID(ctx context.Context, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, spanIDKey{}, sid)
}

// NewSpanID returns a random valid span id.
func NewSpanID() trace.SpanID { return randSpanID() }

// StartWithID starts a span named name with span id sid (see WithSpanID);
// the context it returns holds the span but not the chosen id, so the
// span's children get ids of their own.
func (t *Tracing) StartWithID(ctx context.Context, sid trace.SpanID, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	_, s := t.tracer.Start(WithSpanID(ctx, sid), name, opts...)
	return trace.ContextWithSpan(ctx, s), s
}
