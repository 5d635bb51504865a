package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/telemetry"
)

func scrape(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestMetricSet records each instrument and finds the seed's names in the
// Prometheus text, with bounded labels only.
func TestMetricSet(t *testing.T) {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gen := "g-" + strings.Repeat("ab", 32)
	m.SandboxCreated(ctx, "agents", gen, true, 3*time.Millisecond)
	m.SandboxCreated(ctx, "agents", gen, false, 2*time.Second)
	m.SandboxCreated(ctx, "agents", gen, true, 4*time.Millisecond)
	m.KitSetup(ctx, "agents", true, 20*time.Millisecond)
	m.Released(ctx, "agents", 40*time.Millisecond)
	m.TaskEnded(ctx, "agents", false, "exit_code", time.Second)
	m.TaskEnded(ctx, "agents", false, "something a user wrote", time.Second)
	m.TaskEnded(ctx, "r-0123456789abcdef", true, "", time.Second) // an id where a pool belongs: bounded to other
	m.Cost(ctx, "agents", true, 0.25)
	m.Cost(ctx, "free", false, 0)
	m.ArtifactExported(ctx, "agents", 0)
	m.Orphans(ctx, "agents", 3) // what the reconciler's sweep records
	if err := m.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) {
		return []telemetry.PoolSample{{Pool: "agents", Warm: 2, Claimed: 1, Ready: 1, WarmTarget: 2}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	scrape(t, m.Handler())
	time.Sleep(20 * time.Millisecond)
	text := scrape(t, m.Handler())
	for _, want := range []string{
		`slipway_sandbox_create_latency_seconds_bucket{environment="test",generation="` + gen + `",pool="agents",start="warm",le="0.005"} 2`,
		`slipway_sandbox_create_latency_seconds_count{environment="test",generation="` + gen + `",pool="agents",start="cold"} 1`,
		`slipway_claims_total{environment="test",pool="agents",start="warm"} 2`,
		`slipway_kit_setup_latency_seconds_count{environment="test",pool="agents",start="warm"} 1`,
		`slipway_cleanup_latency_seconds_count{environment="test",pool="agents"} 1`,
		`slipway_task_execution_duration_seconds_count{environment="test",pool="agents"} 2`,
		`slipway_task_execution_duration_seconds_count{environment="test",pool="other"} 1`,
		`slipway_task_failure_count_total{bounded_reason="exit_code",environment="test",pool="agents"} 1`,
		`slipway_task_failure_count_total{bounded_reason="other",environment="test",pool="agents"} 1`,
		`slipway_known_compute_cost_total{environment="test",pool="agents"} 0.25`,
		`slipway_unknown_cost_run_count_total{environment="test",pool="free"} 1`,
		`slipway_artifact_export_bytes_total{environment="test",pool="agents"} 0`,
		`slipway_pool_sandboxes{class="claimed",environment="test",pool="agents"} 1`,
		`slipway_warm_hit_fraction{environment="test",pool="agents"} 0.6666666666666666`,
		`slipway_orphan_resource_count{environment="test",pool="agents"} 3`,
		`slipway_unused_warm_minutes_total{environment="test",pool="agents"} `,
		`slipway_warm_shortage_time_seconds_total{environment="test",pool="agents"} `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
	if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil {
		t.Error(err)
	}
}

// TestCheckExpositionRefuses shows the guard fails on each kind of
// unbounded label.
func TestCheckExpositionRefuses(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"run id", `x{pool="r-0123456789abcdef"} 1`},
		{"job id", `x{pool="j-018f2a3b4c5d6e7f8a"} 1`},
		{"sandbox id", `x{pool="sb-1234abcd"} 1`},
		{"url", `x{pool="http://127.0.0.1:7080/v1"} 1`},
		{"token", `x{pool="0123456789abcdef0123456789abcdef"} 1`},
		{"text", `x{pool="my secret job"} 1`},
		{"label name", `x{run_id="r-1"} 1`},
		{"reason", `x{bounded_reason="exit code 3"} 1`},
		{"start", `x{start="lukewarm"} 1`},
		{"result", `x{result="maybe"} 1`},
		{"step", `x{step="reach http://example.com"} 1`},
	} {
		if err := telemetry.CheckExposition(strings.NewReader(tc.line + "\n")); err == nil {
			t.Errorf("%s: %s passed", tc.name, tc.line)
		}
	}
	ok := `x{pool="agents",generation="g-` + strings.Repeat("0f", 32) + `",start="cold"} 1` + "\n"
	if err := telemetry.CheckExposition(strings.NewReader(ok)); err != nil {
		t.Errorf("bounded labels refused: %v", err)
	}
}

// BenchmarkScrape100Pools times one scrape of the metric endpoint with 100
// pools, each with claims, releases, failures and costs recorded (B10's
// last line). Smoke: go test -run XXX -bench Scrape -benchtime 1x.
func BenchmarkScrape100Pools(b *testing.B) {
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("bench"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var samples []telemetry.PoolSample
	for i := range 100 {
		pool := fmt.Sprintf("pool-%03d", i)
		gen := fmt.Sprintf("g-%064x", i)
		for k := range 20 {
			m.SandboxCreated(ctx, pool, gen, k%4 != 0, time.Duration(k)*time.Millisecond)
			m.KitSetup(ctx, pool, k%4 != 0, time.Duration(k)*time.Millisecond)
			m.Released(ctx, pool, time.Duration(k)*time.Millisecond)
			m.TaskEnded(ctx, pool, k%5 != 0, telemetry.FailureReasons[k%len(telemetry.FailureReasons)], time.Duration(k)*time.Second)
			m.Cost(ctx, pool, k%7 != 0, 0.01)
		}
		samples = append(samples, telemetry.PoolSample{Pool: pool, Warm: 4, Claimed: 2, Ready: 3, WarmTarget: 4})
	}
	if err := m.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) { return samples, nil }); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var size int
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		size = int(n)
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// TestGenerationLabelBounded rolls a pool through generations: the
// generation label of sandbox_create_latency keeps the active and draining
// ones only, a retired generation's series is deleted, and a claim of a
// generation that is neither is counted as other.
func TestGenerationLabelBounded(t *testing.T) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	live := []string{"g1"}
	if err := m.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) {
		return []telemetry.PoolSample{{Pool: "agents", Generations: live}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	count := func(text, gen string) bool {
		return strings.Contains(text, `slipway_sandbox_create_latency_seconds_count{generation="`+gen+`",pool="agents",start="warm"}`)
	}
	scrape(t, m.Handler())
	for i := 2; i <= 30; i++ { // 29 rollouts: g(i-1) drains while g(i) is active, then retires
		prev, cur := fmt.Sprintf("g%d", i-1), fmt.Sprintf("g%d", i)
		live = []string{cur, prev}
		scrape(t, m.Handler())
		m.SandboxCreated(ctx, "agents", cur, true, time.Millisecond)
		m.SandboxCreated(ctx, "agents", prev, true, time.Millisecond)
		text := scrape(t, m.Handler())
		if !count(text, cur) || !count(text, prev) {
			t.Fatalf("rollout to %s: the active and draining generations lack series:\n%s", cur, text)
		}
		live = []string{cur}
		scrape(t, m.Handler())
	}
	m.SandboxCreated(ctx, "agents", "g3", true, time.Millisecond) // long retired
	text := scrape(t, m.Handler())
	n := strings.Count(text, "slipway_sandbox_create_latency_seconds_count{")
	if n != 2 || !count(text, "g30") || !count(text, "other") {
		t.Errorf("after 29 rollouts: %d create_latency series, want g30 and other only:\n%s", n, text)
	}
	if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil {
		t.Error(err)
	}
}

// TestFamiliesFromStart: before any claim or job, the runtime (one pool
// sample) and the control plane (StartPool, StartTier) export every family
// they own at zero, so a dashboard or an alert sees 0 rather than nothing.
// The seed's families, by the process that owns them.
func TestFamiliesFromStart(t *testing.T) {
	ctx := context.Background()
	rt, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) {
		return []telemetry.PoolSample{{Pool: "agents", Warm: 2, Ready: 2, WarmTarget: 2, Generations: []string{"g1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := rt.ObservePolicyDenials(func() map[string]float64 { return map[string]float64{} }); err != nil {
		t.Fatal(err)
	}
	scrape(t, rt.Handler())
	runtimeText := scrape(t, rt.Handler())
	for _, want := range []string{
		`slipway_sandbox_create_latency_seconds_count{generation="g1",pool="agents",start="warm"} 0`,
		`slipway_sandbox_create_latency_seconds_count{generation="g1",pool="agents",start="cold"} 0`,
		`slipway_claims_total{pool="agents",start="warm"} 0`,
		`slipway_cleanup_latency_seconds_count{pool="agents"} 0`,
		`slipway_orphan_resource_count{pool="agents"} 0`,
		`slipway_cleanup_unknown_count{pool="agents"} 0`,
		`slipway_pool_sandboxes{class="warm",pool="agents"} 2`,
		`slipway_unused_warm_minutes_total{pool="agents"} `,
		`slipway_warm_shortage_time_seconds_total{pool="agents"} 0`,
	} {
		if !strings.Contains(runtimeText, want) {
			t.Errorf("runtime before any claim lacks %s", want)
		}
	}
	// A reconcile pass that ran before the first scrape is not overwritten.
	rt2, _ := telemetry.NewMetrics()
	rt2.Orphans(ctx, "agents", 7)
	if err := rt2.ObservePools(func(context.Context) ([]telemetry.PoolSample, error) {
		return []telemetry.PoolSample{{Pool: "agents", Generations: []string{"g1"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if text := scrape(t, rt2.Handler()); !strings.Contains(text, `slipway_orphan_resource_count{pool="agents"} 7`) {
		t.Errorf("the first scrape overwrote a reconcile pass's orphan count:\n%s", text)
	}

	cp, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	cp.StartPool(ctx, "agents")
	cp.StartTier(ctx, "standard")
	controlText := scrape(t, cp.Handler())
	for _, want := range []string{
		`slipway_task_execution_duration_seconds_count{pool="agents"} 0`,
		`slipway_kit_setup_latency_seconds_count{pool="agents",start="warm"} 0`,
		`slipway_task_failure_count_total{bounded_reason="oom_killed",pool="agents"} 0`,
		`slipway_known_compute_cost_total{pool="agents"} 0`,
		`slipway_unknown_cost_run_count_total{pool="agents"} 0`,
		`slipway_artifact_export_bytes_total{pool="agents"} 0`,
		`slipway_job_arrivals_total{tier="standard"} 0`,
	} {
		if !strings.Contains(controlText, want) {
			t.Errorf("control plane before any job lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("runtime:\n%s\ncontrol:\n%s", runtimeText, controlText)
	}
}
