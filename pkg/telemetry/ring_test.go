package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// TestJobTrace writes a job's spans, children first and the root last,
// and reads them back as one tree from the ring; the ring keeps only the
// last N spans.
func TestJobTrace(t *testing.T) {
	ctx := context.Background()
	tr, err := telemetry.NewTracing(ctx, telemetry.WithRingSize(8))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(ctx)
	t0 := time.Now().Add(-time.Second)
	jctx := telemetry.InJob(ctx, "j-1")
	_, adm := tr.Tracer().Start(jctx, "admission", trace.WithTimestamp(t0))
	adm.End(trace.WithTimestamp(t0.Add(10 * time.Millisecond)))
	cctx, claim := tr.Tracer().Start(jctx, "claim", trace.WithAttributes(attribute.Int("allocation_attempt", 1)))
	_, ready := tr.Tracer().Start(cctx, "sandbox ready")
	ready.End()
	claim.End()
	_, other := tr.Tracer().Start(telemetry.InJob(ctx, "j-2"), "claim")
	other.End()
	_, root := tr.StartJobRoot(ctx, "j-1", "job", trace.WithTimestamp(t0))
	root.End()

	spans := tr.Ring().Trace(telemetry.JobTraceID("j-1"))
	if len(spans) != 4 {
		t.Fatalf("got %d spans of j-1, want 4: %+v", len(spans), spans)
	}
	var b strings.Builder
	if err := telemetry.WriteTree(&b, spans); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "job ") || !strings.HasPrefix(lines[1], "  admission") ||
		!strings.HasPrefix(lines[2], "  claim") || !strings.Contains(lines[2], "allocation_attempt=1") || !strings.HasPrefix(lines[3], "    sandbox ready") {
		t.Errorf("tree:\n%s", b.String())
	}
	for range 10 {
		_, s := tr.Tracer().Start(ctx, "noise")
		s.End()
	}
	if n := len(tr.Ring().Trace(telemetry.JobTraceID("j-1"))); n != 0 {
		t.Errorf("a ring of 8 still holds %d spans of j-1 after 10 more", n)
	}
}
