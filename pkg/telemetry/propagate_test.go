package telemetry_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// A span's traceparent read back in another process's tracer makes its
// spans children of it, in the same trace; a span started with a chosen
// id has it, and its children do not.
func TestTraceParentAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	cp, _ := telemetry.NewTracing(ctx)
	rt, _ := telemetry.NewTracing(ctx)
	cctx, claim := cp.Tracer().Start(telemetry.InJob(ctx, "j-1"), "claim")
	tp := telemetry.TraceParent(cctx)
	claim.End()
	if want := "00-" + telemetry.JobTraceID("j-1").String() + "-" + claim.SpanContext().SpanID().String() + "-01"; tp != want {
		t.Fatalf("traceparent %q, want %q", tp, want)
	}
	h := http.Header{}
	h.Set("traceparent", tp)
	rctx, s := rt.Tracer().Start(telemetry.FromHeader(ctx, h), "runtime claim")
	sid := telemetry.NewSpanID()
	xctx, x := rt.StartWithID(rctx, sid, "runner exec")
	_, kid := rt.Tracer().Start(xctx, "runner start")
	kid.End()
	x.End()
	s.End()
	if got := telemetry.TraceParentOf(x.SpanContext()); got != "00-"+telemetry.JobTraceID("j-1").String()+"-"+sid.String()+"-01" {
		t.Errorf("runner exec traceparent %q", got)
	}
	spans := rt.Ring().Trace(telemetry.JobTraceID("j-1"))
	if len(spans) != 3 {
		t.Fatalf("runtime ring: %+v", spans)
	}
	parent := map[string]string{}
	id := map[string]string{}
	for _, s := range spans {
		parent[s.Name], id[s.Name] = s.ParentID, s.SpanID
	}
	if parent["runtime claim"] != claim.SpanContext().SpanID().String() || id["runner exec"] != sid.String() ||
		parent["runner exec"] != id["runtime claim"] || parent["runner start"] != sid.String() || id["runner start"] == sid.String() {
		t.Errorf("parents %v ids %v", parent, id)
	}
	if got := telemetry.FromTraceParent(ctx, "garbage"); trace.SpanContextFromContext(got).IsValid() {
		t.Error("a malformed traceparent gave a parent")
	}
	if telemetry.TraceParent(ctx) != "" {
		t.Error("a context without a span has a traceparent")
	}
}
