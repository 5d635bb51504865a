package runtimeapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// HeaderTraceParent is the HTTP header a request's W3C trace context
// travels in; the runtime's spans for the request are its children.
const HeaderTraceParent = "traceparent"

type traceParentKey struct{}

// WithTraceParent returns ctx whose requests through a Client carry
// traceparent (a W3C traceparent the caller formats, e.g. with OpenTelemetry's
// propagation.TraceContext) in HeaderTraceParent; "" carries none.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceParentKey{}, traceparent)
}

// TraceParentOf is the traceparent WithTraceParent put in ctx, or "".
func TraceParentOf(ctx context.Context) string {
	s, _ := ctx.Value(traceParentKey{}).(string)
	return s
}

// Span is one ended span the runtime recorded (GET /v1/traces/{id}).
type Span struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentId,omitempty"`
	Name       string            `json:"name"`
	Start      time.Time         `json:"start"`
	End        time.Time         `json:"end"`
	Seconds    float64           `json:"seconds"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Error is the span's error status description, when it has one.
	Error string `json:"error,omitempty"`
}

// TraceResult is GET /v1/traces/{id}: the spans of a trace the runtime's
// ring still holds (its own and those it made from its runners' timing),
// by start time.
type TraceResult struct {
	TraceID string `json:"traceId"`
	Spans   []Span `json:"spans"`
}

// Trace returns the spans of trace id (32 hex digits) the runtime holds.
func (c *Client) Trace(ctx context.Context, id string) (*TraceResult, error) {
	var out TraceResult
	if err := c.do(ctx, http.MethodGet, "/v1/traces/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
