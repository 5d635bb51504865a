package control

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/delivery"
	"github.com/slipway-dev/slipway/pkg/control/internal/jobs"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// ConfigSource gives the configuration in effect (tenants, profiles,
// prices) and profiles as they were at an older revision.
type ConfigSource interface {
	Current(ctx context.Context) (*tenancy.Config, error)
	ProfileAt(ctx context.Context, revision, name string) (*tenancy.Versioned[tenancy.Profile], error)
}

// Runtime is an execution plane the control plane dispatches to, through
// its HTTP API.
type Runtime struct {
	// Name is what job records say (never the URL's credentials).
	Name   string
	Client *runtimeapi.Client
}

// Config configures a Plane.
type Config struct {
	Store  *Store
	Config ConfigSource
	// Runtimes serve each pool; a pool not here is unknown.
	Runtimes map[string][]Runtime
	// MaxActive bounds the jobs admitted, allocating or running at once
	// (default 64); QueueBound bounds the queued jobs of all tenants
	// (default 10000).
	MaxActive, QueueBound int
	// Reserve is how many of the MaxActive slots a tenant at or over its
	// fair share (the slots divided by the tenants with work: active,
	// queued or admitted in the last minute) leaves free, at least; a
	// tenant with a backlog (more queued than its concurrency lets it
	// start) also leaves one for each other tenant with work below its
	// share, and a tenant without one (a burst) may take one slot beyond
	// its share from the reserve. The reserve keeps room for a tenant
	// under its share arriving while another floods, since running jobs
	// are not preempted (default MaxActive/4; negative: none beyond the
	// per-tenant slots). A tenant alone always has every slot: its share
	// is all of them.
	Reserve int
	// DispatchAttempts is the retry budget of a failing dispatch (default
	// 5); Lease is how long a dead owner holds a job (default 15s).
	DispatchAttempts int
	Lease            time.Duration
	// Grace is how long a command gets between SIGTERM and SIGKILL when
	// the job's deadline stops it (default 2s).
	Grace time.Duration
	// Events bounds the jobs' event streams: retention, chunking,
	// coalescing, slow SSE clients (defaults in EventConfig).
	Events EventConfig
	// Delivery configures the output worker (internal/delivery).
	Delivery DeliveryConfig
	// ID names this replica in leases (default host:pid).
	ID     string
	Logger *slog.Logger
	// Metrics and Tracing are the plane's telemetry (GET /metrics, job
	// traces); a private set of each when nil.
	Metrics *telemetry.Metrics
	Tracing *telemetry.Tracing
	// Incidents, when set, serves GET /v1/incidents (operators only): a
	// value that encodes as controlapi.Incidents, read from the store at
	// each request (the incidents package does it; it imports this one).
	Incidents func(ctx context.Context) (*incidentreport.Report, error)
	// Failpoint names a point where the plane blocks forever, for crash
	// tests that kill it there (after-claim: a sandbox was claimed, the job
	// does not say so yet).
	Failpoint string
	// nullDispatch, with noDispatch, gets each admitted job instead of
	// River (benchmarks: a null dispatcher).
	nullDispatch func(id string)
	// manualAdmission leaves admission to the jobs engine's AdmitOnce
	// (tests of the queue's bounds, which want jobs to stay queued).
	manualAdmission bool
	// noDispatch leaves admitted jobs alone (tests, benchmarks of submit).
	noDispatch bool
	// enqueueOnly hands admitted jobs to River but runs no River worker
	// (benchmark B8a: the enqueue is measured, nothing is dispatched).
	enqueueOnly bool
}

// DeliveryConfig configures the output worker: it delivers each tenant's
// job events to the tenant's destinations (tenants/<name>.yaml), apart
// from the runs (a run never waits on a destination).
type DeliveryConfig = delivery.Config

// Plane is the control plane: the job engine (internal/jobs: it stores
// intent, admits fairly within the bounds, dispatches to runtimes through
// River, and recovers jobs whose owner died) with the event streams'
// retention and the output worker (internal/delivery); NewServer serves
// it over HTTP.
type Plane struct {
	c      Config
	st     *store.Store     // c.Store's
	ready  apierror.Repeats // readiness errors logged once
	jobs   *jobs.Engine
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// New makes a plane on c.Store; Start runs it.
func New(ctx context.Context, c Config) (*Plane, error) {
	if c.Store == nil || c.Config == nil {
		return nil, errors.New("control: a store and a config source are required")
	}
	withDefaults(&c)
	c.Store.inner.SetEventConfig(c.Events)
	if err := newTelemetry(ctx, &c); err != nil {
		return nil, err
	}
	rts := make(map[string][]jobs.Runtime, len(c.Runtimes))
	for pool, list := range c.Runtimes { // a pool with no runtime yet is still known
		rts[pool] = make([]jobs.Runtime, len(list))
		for i, rt := range list {
			rts[pool][i] = jobs.Runtime(rt)
		}
	}
	e, err := jobs.New(ctx, jobs.Config{Store: c.Store.inner, Config: c.Config, Runtimes: rts,
		MaxActive: c.MaxActive, Reserve: c.Reserve, QueueBound: c.QueueBound, DispatchAttempts: c.DispatchAttempts,
		Lease: c.Lease, Grace: c.Grace, Events: c.Events, ID: c.ID, Logger: c.Logger, Metrics: c.Metrics, Tracing: c.Tracing,
		Failpoint: c.Failpoint, NullDispatch: c.nullDispatch, ManualAdmission: c.manualAdmission, NoDispatch: c.noDispatch, EnqueueOnly: c.enqueueOnly})
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	p := &Plane{c: c, st: c.Store.inner, jobs: e}
	if rc, ok := c.Config.(*RepoConfig); ok && rc.Log != nil {
		// One line per distinct error of the repository, under the id
		// /readyz names: the refresh that fails tells it, readiness finds
		// it told.
		rc.setTell(func(err error) { p.tell("config repository", configWhat, err) })
	}
	return p, nil
}

// withDefaults fills in what c leaves unset, as Config documents.
func withDefaults(c *Config) {
	if c.MaxActive <= 0 {
		c.MaxActive = 64
	}
	switch {
	case c.Reserve == 0:
		c.Reserve = c.MaxActive / 4
	case c.Reserve < 0:
		c.Reserve = 0
	}
	if c.QueueBound <= 0 {
		c.QueueBound = 10000
	}
	if c.DispatchAttempts <= 0 {
		c.DispatchAttempts = 5
	}
	if c.Lease <= 0 {
		c.Lease = 15 * time.Second
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	if c.ID == "" {
		h, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s:%d:%s", h, os.Getpid(), rand.Text()[:6])
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Events = c.Events.WithDefaults()
}

// newTelemetry fills in a plane's metrics and tracing when none were
// given.
func newTelemetry(ctx context.Context, c *Config) error {
	var errs []error
	if c.Metrics == nil {
		m, err := telemetry.NewMetrics()
		c.Metrics = m
		errs = append(errs, err)
	}
	if c.Tracing == nil {
		t, err := telemetry.NewTracing(ctx, telemetry.WithServiceName("slipway-control"))
		c.Tracing = t
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("control: telemetry: %w", err)
	}
	return nil
}

// runDelivery runs the output worker (internal/delivery) of a plane
// configured by c on st until ctx ends; its deliveries are spans of the
// jobs' traces.
func runDelivery(ctx context.Context, c Config, st *store.Store) {
	delivery.Run(ctx, c.Delivery, delivery.Env{Store: st, Current: c.Config.Current, Owner: c.ID,
		Logger: c.Logger, Metrics: c.Metrics, Span: jobs.SpanOf(c.Tracing)})
}

// Start runs the job engine (admission, dispatch, recovery), the event
// streams' retention and the output worker until Stop.
func (p *Plane) Start(ctx context.Context) error {
	ctx, p.cancel = context.WithCancel(ctx)
	if err := p.jobs.Start(ctx); err != nil {
		p.cancel()
		return fmt.Errorf("control: %w", err)
	}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); retainEvents(ctx, p.st, p.c.Events, p.c.Logger) }() // streams.go
	go func() { defer p.wg.Done(); runDelivery(ctx, p.c, p.st) }()
	return nil
}

// Stop stops taking work, waits for River's running jobs (up to ctx) and
// closes the queue. Jobs still running keep their lease and are recovered
// by the next plane. A plane never started is closed.
func (p *Plane) Stop(ctx context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	return p.jobs.Stop(ctx)
}

// Submit stores a job for tenant and returns it; created is false when the
// idempotency key named an existing job (which is returned). Errors:
// ErrBadRequest, ErrForbidden (a 4xx each, nothing stored), *LimitError
// (429), ErrConflict (the key was used for another request).
func (p *Plane) Submit(ctx context.Context, tenant string, spec controlapi.Spec) (*controlapi.Job, bool, error) {
	return p.jobs.Submit(ctx, tenant, "", spec)
}

// Get returns a job of tenant ("" : any, for operators), with its event
// stream's head and its deliveries.
func (p *Plane) Get(ctx context.Context, tenant, id string) (*controlapi.Job, error) {
	j, err := p.st.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	h, _, err := p.st.ReadEvents(ctx, j.ID, math.MaxInt64, 1) // the head alone
	if err != nil {
		return nil, err
	}
	j.Stream = &h
	return j, delivery.View(ctx, p.st, p.c.Config.Current, j) // its deliveries, from the output worker's records
}

// Profile interprets a job with its profile as it was when it was
// submitted, even after the file changed or was deleted.
func (p *Plane) Profile(ctx context.Context, j *controlapi.Job) (*controlapi.JobProfile, error) {
	return p.jobs.Profile(ctx, j)
}

// List lists jobs.
func (p *Plane) List(ctx context.Context, f ListFilter) ([]*controlapi.Job, error) {
	return p.st.List(ctx, f)
}

// Cancel cancels a job of tenant ("" : any): a queued or admitted job ends
// canceled at once; an allocating or running one is stopped by its owner
// (or the recoverer, if the owner is gone).
func (p *Plane) Cancel(ctx context.Context, tenant, id string) (*controlapi.Job, error) {
	return p.jobs.Cancel(ctx, tenant, id, "", "")
}

// CancelBecause cancels a job and records reason and the id of the token
// that asked (by) in its cancellation record.
func (p *Plane) CancelBecause(ctx context.Context, tenant, id, reason, by string) (*controlapi.Job, error) {
	return p.jobs.Cancel(ctx, tenant, id, reason, by)
}

// Trace returns job j's trace: what this replica's ring holds, with the
// spans of the runtime that served it.
func (p *Plane) Trace(ctx context.Context, j *controlapi.Job) *controlapi.JobTrace {
	return p.jobs.Trace(ctx, j)
}
