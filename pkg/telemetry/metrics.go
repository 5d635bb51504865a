package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Namespace prefixes every metric's Prometheus name.
const Namespace = "slipway"

// Latency buckets, in seconds: a warm hit takes milliseconds, a cold start
// seconds.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Task duration buckets, in seconds: a command to an hour.
var taskBuckets = []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// Metrics is a process's metric set on its own registry.
type Metrics struct {
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter
	env      []attribute.KeyValue

	claims        metric.Int64Counter
	createLatency *prometheus.HistogramVec // client_golang's: series of retired generations can be deleted
	kitSetup      *prometheus.HistogramVec
	taskDuration  *prometheus.HistogramVec
	taskFailures  metric.Int64Counter
	artifactBytes metric.Int64Counter
	cleanup       *prometheus.HistogramVec
	orphans       metric.Int64Gauge
	cleanupUnk    metric.Int64Gauge
	knownCost     metric.Float64Counter
	unknownCost   metric.Int64Counter
	queue         queueInstruments

	mu    sync.Mutex
	pools map[string]*poolTotals
}

// poolTotals are what the observed instruments of one pool accumulate.
type poolTotals struct {
	warm, cold       int64
	unusedWarmMin    float64
	shortageSec      float64
	lastSample       time.Time
	lastReady        int
	lastShort        bool
	sampled, claimed bool
	// live is the pool's active and draining generations at the last
	// sample (nil before one named them); labelled is every generation a
	// create_latency series exists for.
	live, labelled []string
	started        bool
	reconciled     bool // Orphans or CleanupUnknown recorded
}

// generation is the label value of gen: itself while it is one of the
// pool's live (active or draining) generations or before any sample named
// them, else "other". Callers hold m.mu.
func (t *poolTotals) generation(gen string) string {
	if t.live != nil && !slices.Contains(t.live, gen) {
		return "other"
	}
	if !slices.Contains(t.labelled, gen) {
		t.labelled = append(t.labelled, gen)
	}
	return gen
}

// retire deletes the create_latency series of pool's generations that are
// no longer live, so that the label takes the active and draining
// generations only, however many rollouts the process lives through.
// Callers hold m.mu.
func (m *Metrics) retire(pool string, t *poolTotals, live []string) {
	t.live = live
	kept := t.labelled[:0]
	for _, g := range t.labelled {
		if slices.Contains(live, g) {
			kept = append(kept, g)
			continue
		}
		m.createLatency.DeletePartialMatch(prometheus.Labels{"pool": pool, "generation": g})
	}
	t.labelled = kept
}

type options struct {
	env string
}

// Option configures NewMetrics.
type Option func(*options) error

// WithEnvironment adds the label environment=env to every series (a
// deployment's name, e.g. "prod"; 1 to 32 of a-z 0-9 - _).
func WithEnvironment(env string) Option {
	return func(o *options) error {
		if !wordRE.MatchString(env) {
			return fmt.Errorf("telemetry: environment %q: want 1 to 32 of a-z 0-9 - _", env)
		}
		o.env = env
		return nil
	}
}

// NewMetrics makes the metric set on a private registry.
func NewMetrics(opts ...Option) (*Metrics, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	m := &Metrics{reg: prometheus.NewRegistry(), pools: map[string]*poolTotals{}}
	if o.env != "" {
		m.env = []attribute.KeyValue{attribute.String("environment", o.env)}
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(m.reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(), otelprom.WithNamespace(Namespace))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	m.provider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	m.meter = m.provider.Meter("github.com/slipway-dev/slipway")
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var e error
	mt := m.meter
	m.claims, e = mt.Int64Counter("claims", metric.WithDescription("Claims granted by the runtime, by warm hit or cold start (runtime claim path)."))
	add(e)
	var constLabels prometheus.Labels
	if o.env != "" {
		constLabels = prometheus.Labels{"environment": o.env}
	}
	// Histograms are client_golang's, on the same registry: a series can
	// be made at zero before its first observation (StartPool,
	// StartRuntimePool) and deleted when its generation retires, which the
	// OpenTelemetry SDK's histograms cannot.
	hist := func(name string, buckets []float64, help string, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Buckets: buckets, ConstLabels: constLabels, Help: help}, labels)
		add(m.reg.Register(h))
		return h
	}
	m.createLatency = hist("sandbox_create_latency_seconds", latencyBuckets,
		"Time from a claim request to a ready sandbox; start=warm (a warm member) and start=cold (a sandbox created for the claim) are separate series; generation is the pool's active or draining generation, other for any other (runtime claim path).",
		"pool", "generation", "start")
	m.kitSetup = hist("kit_setup_latency_seconds", latencyBuckets, "Time from the sandbox assigned to the runner awake (its first command accepted), from the run manifest's lifecycle (control plane, at a job's end).", "pool", "start")
	m.taskDuration = hist("task_execution_duration_seconds", taskBuckets, "A job's time from its sandbox granted to its end (control plane, at a job's end).", "pool")
	m.taskFailures, e = mt.Int64Counter("task_failure_count", metric.WithDescription("Jobs that did not succeed, by bounded_reason (control plane, at a job's end)."))
	add(e)
	m.artifactBytes, e = mt.Int64Counter("artifact_export_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of artifacts exported: result and product events delivered to a tenant's destination, counted at the receipt (control plane delivery)."))
	add(e)
	m.cleanup = hist("cleanup_latency_seconds", latencyBuckets, "Time the runtime took to release a claim: stop the sandbox, revoke its credentials, record the manifest (runtime release path).", "pool")
	m.orphans, e = mt.Int64Gauge("orphan_resource_count",
		metric.WithDescription("Resources found with no live owner at the cleanup reconciler's last pass: sandboxes, leases, credentials, stuck deletions (runtime reconciler, each pass)."))
	add(e)
	m.cleanupUnk, e = mt.Int64Gauge("cleanup_unknown_count",
		metric.WithDescription("Cleanup actions whose outcome is unknown (a delete that failed or timed out), tracked with an owner and a deadline and retried each pass; above 0 needs an operator: slipway cleanup list (runtime reconciler, each pass)."))
	add(e)
	m.knownCost, e = mt.Float64Counter("known_compute_cost",
		metric.WithDescription("Compute cost of ended jobs whose pool has a price, in the price table's currency (control plane, at a job's end)."))
	add(e)
	m.unknownCost, e = mt.Int64Counter("unknown_cost_run_count",
		metric.WithDescription("Ended jobs whose cost is unknown: their pool has no price (control plane, at a job's end)."))
	add(e)
	m.queue, e = newQueueInstruments(mt)
	add(e)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	return m, nil
}

// Handler serves the Prometheus text of the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Shutdown stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

func (m *Metrics) attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(append([]attribute.KeyValue(nil), m.env...), kv...)...)
}

func start(warm bool) string {
	if warm {
		return "warm"
	}
	return "cold"
}

// SandboxCreated records a granted claim of pool: a warm hit or a cold
// start, of generation gen, that took d.
func (m *Metrics) SandboxCreated(ctx context.Context, pool, gen string, warm bool, d time.Duration) {
	pool, gen = Bound(pool), Bound(gen)
	m.claims.Add(ctx, 1, m.attrs(attribute.String("pool", pool), attribute.String("start", start(warm))))
	m.mu.Lock()
	t := m.totals(pool)
	gen = t.generation(gen)
	m.createLatency.WithLabelValues(pool, gen, start(warm)).Observe(d.Seconds())
	t.claimed = true
	if warm {
		t.warm++
	} else {
		t.cold++
	}
	m.mu.Unlock()
}

// KitSetup records the time from a sandbox assigned to its runner awake.
func (m *Metrics) KitSetup(ctx context.Context, pool string, warm bool, d time.Duration) {
	m.kitSetup.WithLabelValues(Bound(pool), start(warm)).Observe(d.Seconds())
}

// Released records the release of a claim of pool that took d.
func (m *Metrics) Released(ctx context.Context, pool string, d time.Duration) {
	m.cleanup.WithLabelValues(Bound(pool)).Observe(d.Seconds())
}

// TaskEnded records a job of pool that ended: succeeded or not (reason,
// bounded by FailureReason), that ran for d (0: it never ran).
func (m *Metrics) TaskEnded(ctx context.Context, pool string, succeeded bool, reason string, d time.Duration) {
	pool = Bound(pool)
	if d > 0 {
		m.taskDuration.WithLabelValues(pool).Observe(d.Seconds())
	}
	if !succeeded {
		m.taskFailures.Add(ctx, 1, m.attrs(attribute.String("pool", pool), attribute.String("bounded_reason", FailureReason(reason))))
	}
}

// StartPool exports the job counters of pool at zero (a failure count per
// bounded reason, known and unknown cost, exported bytes), so that the first
// failure is an increase a rate or an alert sees rather than a series
// appearing at 1. The control plane calls it for each pool it serves.
func (m *Metrics) StartPool(ctx context.Context, pool string) {
	pool = Bound(pool)
	for _, r := range FailureReasons {
		m.taskFailures.Add(ctx, 0, m.attrs(attribute.String("pool", pool), attribute.String("bounded_reason", r)))
	}
	m.knownCost.Add(ctx, 0, m.attrs(attribute.String("pool", pool)))
	m.unknownCost.Add(ctx, 0, m.attrs(attribute.String("pool", pool)))
	m.artifactBytes.Add(ctx, 0, m.attrs(attribute.String("pool", pool)))
	m.taskDuration.WithLabelValues(pool)
	m.kitSetup.WithLabelValues(pool, "warm")
	m.kitSetup.WithLabelValues(pool, "cold")
}

// StartRuntimePool exports the runtime's series of pool at zero the first
// time it is called for the pool (later calls do nothing): claims and
// create latency per start for each of gens (the active and draining
// generations), release latency, and the reconciler's orphan and
// unknown-cleanup counts, so that dashboards and alerts see zero rather
// than nothing before the first claim or reconcile pass.
func (m *Metrics) StartRuntimePool(ctx context.Context, pool string, gens []string) {
	pool = Bound(pool)
	m.mu.Lock()
	t := m.totals(pool)
	first := !t.started
	t.started = true
	if first {
		for _, g := range gens {
			g = t.generation(Bound(g))
			m.createLatency.WithLabelValues(pool, g, "warm")
			m.createLatency.WithLabelValues(pool, g, "cold")
		}
	}
	m.mu.Unlock()
	if !first {
		return
	}
	for _, st := range []string{"warm", "cold"} {
		m.claims.Add(ctx, 0, m.attrs(attribute.String("pool", pool), attribute.String("start", st)))
	}
	m.cleanup.WithLabelValues(pool)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !t.reconciled { // a pass that already ran is not overwritten with 0
		m.orphans.Record(ctx, 0, m.attrs(attribute.String("pool", pool)))
		m.cleanupUnk.Record(ctx, 0, m.attrs(attribute.String("pool", pool)))
	}
}

// Cost records an ended job's compute cost: amount when known, else one
// more run of unknown cost.
func (m *Metrics) Cost(ctx context.Context, pool string, known bool, amount float64) {
	if known {
		m.knownCost.Add(ctx, max(amount, 0), m.attrs(attribute.String("pool", Bound(pool))))
		return
	}
	m.unknownCost.Add(ctx, 1, m.attrs(attribute.String("pool", Bound(pool))))
}

// ArtifactExported records n bytes of artifacts exported from pool.
func (m *Metrics) ArtifactExported(ctx context.Context, pool string, n int64) {
	m.artifactBytes.Add(ctx, n, m.attrs(attribute.String("pool", Bound(pool))))
}

// Orphans records how many resources of pool have no live owner now.
func (m *Metrics) Orphans(ctx context.Context, pool string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.totals(Bound(pool)).reconciled = true
	m.orphans.Record(ctx, n, m.attrs(attribute.String("pool", Bound(pool))))
}

// CleanupUnknown records how many cleanup actions of pool have an unknown
// outcome now.
func (m *Metrics) CleanupUnknown(ctx context.Context, pool string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.totals(Bound(pool)).reconciled = true
	m.cleanupUnk.Record(ctx, n, m.attrs(attribute.String("pool", Bound(pool))))
}

func (m *Metrics) totals(pool string) *poolTotals {
	t := m.pools[pool]
	if t == nil {
		t = &poolTotals{}
		m.pools[pool] = t
	}
	return t
}
