package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// StateClasses are the states of a sandbox whose time
// sandbox_state_seconds counts, as its class label: warm idle (a warm
// member ready or starting, unclaimed), active (held by a run), proof (a
// rollout's proof claim).
var StateClasses = []string{"warm_idle", "active", "proof"}

// StateSample is the time one pool's sandboxes spent in one state.
type StateSample struct {
	Pool, State string
	Seconds     float64
}

// ObserveStateSeconds registers sandbox_state_seconds{pool,class}: the
// time sandboxes spent in each state since the process started (open
// intervals to the scrape), read at each scrape from sample (the runtime's
// cost ledger). Unlike unused_warm_minutes it is exact, not integrated
// between scrapes; priced by state it is cost by state. A state outside
// StateClasses is not exported. Call it once.
func (m *Metrics) ObserveStateSeconds(sample func() []StateSample) error {
	c, err := m.meter.Float64ObservableCounter("sandbox_state_seconds", metric.WithUnit("s"),
		metric.WithDescription("Time sandboxes spent in each state (class: warm_idle, active, proof) since the runtime started (runtime cost ledger)."))
	if err != nil {
		return fmt.Errorf("telemetry: sandbox_state_seconds: %w", err)
	}
	_, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		sum := map[[2]string]float64{} // pools bounded to "other" add up
		for _, s := range sample() {
			if !validState(s.State) {
				continue
			}
			sum[[2]string{Bound(s.Pool), s.State}] += s.Seconds
		}
		for k, v := range sum {
			o.ObserveFloat64(c, v, metric.WithAttributes(append([]attribute.KeyValue{attribute.String("pool", k[0]), attribute.String("class", k[1])}, m.env...)...))
		}
		return nil
	}, c)
	if err != nil {
		return fmt.Errorf("telemetry: sandbox_state_seconds: %w", err)
	}
	return nil
}

func validState(s string) bool {
	for _, c := range StateClasses {
		if s == c {
			return true
		}
	}
	return false
}
