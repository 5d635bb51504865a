package telemetry_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// A canary's rounds: counted by result, the failing step counted, each
// step's time, the last success's time; a step that is not a short word
// is counted as other, and the exposition stays bounded.
func TestCanaryMetrics(t *testing.T) {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("test"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := telemetry.NewCanaryMetrics(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	end := time.Unix(1700000000, 0)
	steps := []telemetry.CanaryStepTime{{Step: "claim", Duration: 20 * time.Millisecond}, {Step: "release", Duration: 30 * time.Millisecond}}
	c.Round(ctx, "agents", steps, "", end)
	c.Round(ctx, "agents", steps[:1], "claim", end.Add(time.Minute))
	c.Round(ctx, "agents", []telemetry.CanaryStepTime{{Step: "Reach http://x", Duration: time.Millisecond}}, "Reach http://x", end.Add(2*time.Minute))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		`slipway_canary_rounds_total{environment="test",pool="agents",result="pass"} 1`,
		`slipway_canary_rounds_total{environment="test",pool="agents",result="fail"} 2`,
		`slipway_canary_failures_total{environment="test",pool="agents",step="claim"} 1`,
		`slipway_canary_failures_total{environment="test",pool="agents",step="other"} 1`,
		`slipway_canary_step_duration_seconds_count{environment="test",pool="agents",step="claim"} 2`,
		`slipway_canary_step_duration_seconds_count{environment="test",pool="agents",step="release"} 1`,
		`slipway_canary_last_success_timestamp_seconds{environment="test",pool="agents"} 1.7e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %s", want)
		}
	}
	if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil {
		t.Error(err)
	}
	if t.Failed() {
		t.Log(text)
	}
}
