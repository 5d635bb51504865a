package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// PoolSample is what a runtime sees of one pool when it is scraped.
type PoolSample struct {
	Pool string
	// Warm counts warm members (ready or warming), Claimed the sandboxes
	// of claims, Dead those that died and are not yet removed.
	Warm, Claimed, Dead int
	// Ready counts the warm members of the active generation ready to be
	// claimed; WarmTarget is how many the pool should keep. Ready below
	// WarmTarget is a shortage.
	Ready, WarmTarget int
	// Generations are the pool's active and draining generations: the
	// values sandbox_create_latency's generation label keeps (nil: leave
	// the label as it is).
	Generations []string
}

// ObservePools registers the instruments read at each scrape from sample:
// pool_sandboxes{pool,class}, warm_hit_fraction{pool} (warm hits over all
// claims since the process started), unused_warm_minutes{pool} (ready warm
// members times the time between scrapes) and warm_shortage_time{pool}
// (the time between scrapes during which the active generation had fewer
// ready members than its warm size). The last two integrate the state seen
// at one scrape over the time to the next: their resolution is the scrape
// interval. Call it once.
func (m *Metrics) ObservePools(sample func(ctx context.Context) ([]PoolSample, error)) error {
	mt := m.meter
	sizes, err1 := mt.Int64ObservableGauge("pool_sandboxes", metric.WithDescription("Sandboxes per pool by class: warm, claimed, dead (runtime, at each scrape)."))
	frac, err2 := mt.Float64ObservableGauge("warm_hit_fraction", metric.WithDescription("Warm hits over all claims granted since the runtime started (runtime claim path)."))
	unused, err3 := mt.Float64ObservableCounter("unused_warm_minutes", metric.WithDescription("Minutes ready warm members waited unclaimed, integrated between scrapes (runtime, at each scrape)."))
	short, err4 := mt.Float64ObservableCounter("warm_shortage_time", metric.WithUnit("s"),
		metric.WithDescription("Time the active generation had fewer ready warm members than its warm size, integrated between scrapes (runtime, at each scrape)."))
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return fmt.Errorf("telemetry: pool instruments: %w", err)
		}
	}
	_, err := mt.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		samples, err := sample(ctx)
		if err != nil {
			return err
		}
		for _, s := range samples {
			m.StartRuntimePool(ctx, s.Pool, s.Generations)
		}
		now := time.Now()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, s := range samples {
			pool := Bound(s.Pool)
			attr := func(kv ...attribute.KeyValue) metric.ObserveOption {
				return metric.WithAttributes(append(append([]attribute.KeyValue{attribute.String("pool", pool)}, m.env...), kv...)...)
			}
			o.ObserveInt64(sizes, int64(s.Warm), attr(attribute.String("class", "warm")))
			o.ObserveInt64(sizes, int64(s.Claimed), attr(attribute.String("class", "claimed")))
			o.ObserveInt64(sizes, int64(s.Dead), attr(attribute.String("class", "dead")))
			t := m.totals(pool)
			if t.sampled {
				dt := now.Sub(t.lastSample)
				t.unusedWarmMin += float64(t.lastReady) * dt.Minutes()
				if t.lastShort {
					t.shortageSec += dt.Seconds()
				}
			}
			t.sampled, t.lastSample, t.lastReady, t.lastShort = true, now, s.Ready, s.Ready < s.WarmTarget
			if s.Generations != nil {
				gens := make([]string, len(s.Generations))
				for i, g := range s.Generations {
					gens[i] = Bound(g)
				}
				m.retire(pool, t, gens)
			}
			o.ObserveFloat64(unused, t.unusedWarmMin, attr())
			o.ObserveFloat64(short, t.shortageSec, attr())
		}
		for pool, t := range m.pools {
			if n := t.warm + t.cold; n > 0 {
				o.ObserveFloat64(frac, float64(t.warm)/float64(n), metric.WithAttributes(append([]attribute.KeyValue{attribute.String("pool", pool)}, m.env...)...))
			}
		}
		return nil
	}, sizes, frac, unused, short)
	if err != nil {
		return fmt.Errorf("telemetry: pool callback: %w", err)
	}
	return nil
}

// ObservePolicyDenials exports policy_denial_count{policy_revision}: egress
// attempts the allow-list denied, by the policy revision of the run that
// made them (a revision is a commit: a bounded set), read at each scrape.
func (m *Metrics) ObservePolicyDenials(denials func() map[string]float64) error {
	c, err := m.meter.Float64ObservableCounter("policy_denial_count",
		metric.WithDescription("Egress attempts the allow-list denied, by the policy revision of the run that made them (runtime egress proxy)."))
	if err != nil {
		return fmt.Errorf("telemetry: policy_denial_count: %w", err)
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for rev, n := range denials() {
			o.ObserveFloat64(c, n, metric.WithAttributes(append([]attribute.KeyValue{attribute.String("policy_revision", rev)}, m.env...)...))
		}
		return nil
	}, c)
	return err
}
