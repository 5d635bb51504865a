package telemetry_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// Labels stay bounded whatever the callers pass: a failure reason outside
// FailureReasons is counted as "other", and a run id where a pool name
// belongs becomes "other" too. CheckExposition passes the scrape and fails
// one that carries a run id.
func ExampleMetrics() {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("staging"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	m.TaskEnded(ctx, "agents", false, "exit_code", time.Second)
	m.TaskEnded(ctx, "agents", false, "the agent printed: token=abc123", time.Second)
	m.TaskEnded(ctx, "r-0123456789abcdef", false, "oom_killed", time.Second)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	scrape := rec.Body.String()
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, "slipway_task_failure_count") {
			fmt.Println(line)
		}
	}
	fmt.Println("scrape:", telemetry.CheckExposition(strings.NewReader(scrape)))

	forged := `slipway_task_failure_count_total{pool="r-0123456789abcdef"} 1` + "\n"
	fmt.Println("forged:", telemetry.CheckExposition(strings.NewReader(forged)))
	// Output:
	// slipway_task_failure_count_total{bounded_reason="exit_code",environment="staging",pool="agents"} 1
	// slipway_task_failure_count_total{bounded_reason="oom_killed",environment="staging",pool="other"} 1
	// slipway_task_failure_count_total{bounded_reason="other",environment="staging",pool="agents"} 1
	// scrape: <nil>
	// forged: telemetry: unbounded labels:
	// slipway_task_failure_count_total: label pool="r-0123456789abcdef" is a per-request id
}

// A job's trace id is derived from its id, so spans from any replica or
// recovery of the job join one trace; its root span, written when the job
// ends, is their parent. The ring keeps them for `slipway job trace`.
func ExampleTracing() {
	ctx := context.Background()
	tr, err := telemetry.NewTracing(ctx, telemetry.WithRingSize(64))
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Shutdown(ctx)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Two replicas' spans of job j-1, before the job's root exists.
	jctx := telemetry.InJob(ctx, "j-1")
	_, claim := tr.Tracer().Start(jctx, "claim", trace.WithTimestamp(at(10*time.Millisecond)),
		trace.WithAttributes(attribute.String("pool", "agents")))
	claim.End(trace.WithTimestamp(at(35 * time.Millisecond)))
	_, run := tr.Tracer().Start(jctx, "run", trace.WithTimestamp(at(40*time.Millisecond)))
	run.End(trace.WithTimestamp(at(1240 * time.Millisecond)))
	// The job ends: its root span, from submission.
	_, root := tr.StartJobRoot(ctx, "j-1", "job", trace.WithTimestamp(t0))
	root.End(trace.WithTimestamp(at(1250 * time.Millisecond)))

	spans := tr.Ring().Trace(telemetry.JobTraceID("j-1"))
	fmt.Println(len(spans), "spans, trace", telemetry.JobTraceID("j-1") == root.SpanContext().TraceID())
	var tree strings.Builder
	if err := telemetry.WriteTree(&tree, spans); err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(tree.String(), "\n"), "\n") {
		fmt.Println(strings.TrimRight(line, " "))
	}
	// Output:
	// 3 spans, trace true
	// job                                    1.250s  +0µs
	//   claim                                25.0ms  +10.0ms    pool=agents
	//   run                                  1.200s  +40.0ms
}
