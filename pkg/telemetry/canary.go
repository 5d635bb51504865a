package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Canary buckets, in seconds: a step takes milliseconds (a warm claim) to
// a minute (a cold start on a slow node).
var canaryBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// CanaryMetrics are a canary's instruments on a Metrics' registry:
// canary_rounds_total{pool,result}, canary_failures_total{pool,step} (the
// step that failed a round), canary_step_duration{pool,step} and
// canary_last_success_timestamp{pool} (Unix seconds of the last round that
// passed). A step is a bounded word ("other" otherwise), a result pass or
// fail.
type CanaryMetrics struct {
	m           *Metrics
	rounds      metric.Int64Counter
	failures    metric.Int64Counter
	step        metric.Float64Histogram
	lastSuccess metric.Float64Gauge
}

// CanaryStepTime is one timed step of a canary round.
type CanaryStepTime struct {
	Step     string
	Duration time.Duration
}

// NewCanaryMetrics registers the canary's instruments on m. Call it once
// per Metrics.
func NewCanaryMetrics(m *Metrics) (*CanaryMetrics, error) {
	c := &CanaryMetrics{m: m}
	var e1, e2, e3, e4 error
	mt := m.meter
	c.rounds, e1 = mt.Int64Counter("canary_rounds", metric.WithDescription("Canary rounds per pool by result: pass or fail (slipway canary)."))
	c.failures, e2 = mt.Int64Counter("canary_failures", metric.WithDescription("Failed canary rounds per pool by the step that failed (slipway canary)."))
	c.step, e3 = mt.Float64Histogram("canary_step_duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(canaryBuckets...),
		metric.WithDescription("Time each step of a canary round took, per pool and step (slipway canary)."))
	c.lastSuccess, e4 = mt.Float64Gauge("canary_last_success_timestamp", metric.WithUnit("s"),
		metric.WithDescription("Unix time of the pool's last canary round that passed (slipway canary)."))
	if err := errors.Join(e1, e2, e3, e4); err != nil {
		return nil, fmt.Errorf("telemetry: canary instruments: %w", err)
	}
	return c, nil
}

// Round records one canary round of pool that ended at end: its steps'
// times, and the step that failed it ("" when it passed).
func (c *CanaryMetrics) Round(ctx context.Context, pool string, steps []CanaryStepTime, failed string, end time.Time) {
	pool = Bound(pool)
	for _, s := range steps {
		c.step.Record(ctx, s.Duration.Seconds(), c.m.attrs(attribute.String("pool", pool), attribute.String("step", boundWord(s.Step))))
	}
	if failed != "" {
		c.rounds.Add(ctx, 1, c.m.attrs(attribute.String("pool", pool), attribute.String("result", "fail")))
		c.failures.Add(ctx, 1, c.m.attrs(attribute.String("pool", pool), attribute.String("step", boundWord(failed))))
		return
	}
	c.rounds.Add(ctx, 1, c.m.attrs(attribute.String("pool", pool), attribute.String("result", "pass")))
	c.lastSuccess.Record(ctx, float64(end.UnixNano())/1e9, c.m.attrs(attribute.String("pool", pool)))
}

// boundWord is v when it is a short lower-case word, else "other".
func boundWord(v string) string {
	if !wordRE.MatchString(v) {
		return "other"
	}
	return v
}
