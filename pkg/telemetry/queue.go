package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Admission wait buckets, in seconds: admitted at once to an hour queued.
var admissionBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// QueueSample is the number of jobs queued (stored, not yet admitted) for
// the tenants of one tier.
type QueueSample struct {
	Tier   string
	Queued int64
}

// queueInstruments are the control plane's admission metrics: what arrives,
// what waits, and for how long, per tenant tier (seed 000: "inspect arrival
// rate, capacity, job duration and stuck cleanup separately").
type queueInstruments struct {
	arrivals metric.Int64Counter
	wait     metric.Float64Histogram
}

func newQueueInstruments(mt metric.Meter) (queueInstruments, error) {
	var q queueInstruments
	var e1, e2 error
	q.arrivals, e1 = mt.Int64Counter("job_arrivals",
		metric.WithDescription("Jobs stored by the control plane (new submissions, not idempotent repeats), per tenant tier; its rate is the arrival rate (control plane, at submission)."))
	q.wait, e2 = mt.Float64Histogram("admission_wait", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(admissionBuckets...),
		metric.WithDescription("Time from a job stored to admitted, per tenant tier (control plane admission)."))
	if e1 != nil || e2 != nil {
		return q, fmt.Errorf("job_arrivals: %v; admission_wait: %v", e1, e2)
	}
	return q, nil
}

// StartTier exports tier's arrival count at zero, so that a rate sees the
// first arrival.
func (m *Metrics) StartTier(ctx context.Context, tier string) {
	m.queue.arrivals.Add(ctx, 0, m.attrs(attribute.String("tier", boundWord(tier))))
}

// JobArrived records a job stored for a tenant of tier.
func (m *Metrics) JobArrived(ctx context.Context, tier string) {
	m.queue.arrivals.Add(ctx, 1, m.attrs(attribute.String("tier", boundWord(tier))))
}

// JobAdmitted records a job of a tenant of tier admitted after waiting d.
func (m *Metrics) JobAdmitted(ctx context.Context, tier string, d time.Duration) {
	m.queue.wait.Record(ctx, max(d, 0).Seconds(), m.attrs(attribute.String("tier", boundWord(tier))))
}

// ObserveQueue registers queue_depth{tier}: sample is called at each scrape
// and returns the jobs queued per tier (every configured tier, 0 included).
func (m *Metrics) ObserveQueue(sample func(ctx context.Context) ([]QueueSample, error)) error {
	g, err := m.meter.Int64ObservableGauge("queue_depth",
		metric.WithDescription("Jobs stored and not yet admitted, per tenant tier, read from the store at each scrape (control plane)."))
	if err != nil {
		return fmt.Errorf("telemetry: queue_depth: %w", err)
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		s, err := sample(ctx)
		if err != nil {
			return err
		}
		for _, q := range s {
			o.ObserveInt64(g, q.Queued, metric.WithAttributes(append([]attribute.KeyValue{attribute.String("tier", boundWord(q.Tier))}, m.env...)...))
		}
		return nil
	}, g)
	if err != nil {
		return fmt.Errorf("telemetry: queue_depth: %w", err)
	}
	return nil
}
