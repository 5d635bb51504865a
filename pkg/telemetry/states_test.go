package telemetry_test

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// TestStateSeconds: sandbox_state_seconds carries pool and class (a
// state) only; a state outside StateClasses is left out and a pool that
// looks like an id is bounded, summed into other.
func TestStateSeconds(t *testing.T) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveStateSeconds(func() []telemetry.StateSample {
		return []telemetry.StateSample{
			{Pool: "agents", State: "warm_idle", Seconds: 40},
			{Pool: "agents", State: "active", Seconds: 30},
			{Pool: "agents", State: "retained", Seconds: 5},
			{Pool: "r-0123456789abcdef", State: "active", Seconds: 1},
			{Pool: "r-fedcba9876543210", State: "active", Seconds: 2},
		}
	}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m.Handler())
	for _, want := range []string{
		`slipway_sandbox_state_seconds_total{class="warm_idle",pool="agents"} 40`,
		`slipway_sandbox_state_seconds_total{class="active",pool="agents"} 30`,
		`slipway_sandbox_state_seconds_total{class="active",pool="other"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, "retained") {
		t.Errorf("a state outside StateClasses was exported:\n%s", text)
	}
	if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil {
		t.Error(err)
	}
	bad := `slipway_sandbox_state_seconds_total{class="napping",pool="agents"} 1` + "\n"
	if err := telemetry.CheckExposition(strings.NewReader("# TYPE slipway_sandbox_state_seconds_total counter\n" + bad)); err == nil {
		t.Error("CheckExposition took a class outside its words")
	}
}
