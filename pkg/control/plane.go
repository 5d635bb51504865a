package control

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
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
	// Delivery configures the output worker (delivery.go).
	Delivery DeliveryConfig
	// ID names this replica in leases (default host:pid).
	ID     string
	Logger *slog.Logger
	// Metrics and Tracing are the plane's telemetry (GET /metrics, job
	// traces); a private set of each when nil.
	Metrics *telemetry.Metrics
	Tracing *telemetry.Tracing
	// Failpoint names a point where the plane blocks forever, for crash
	// tests that kill it there (after-claim: a sandbox was claimed, the job
	// does not say so yet).
	Failpoint string
	// nullDispatch, with noDispatch, gets each admitted job instead of
	// River (benchmarks: a null dispatcher).
	nullDispatch func(id string)
	// manualAdmission leaves admission to admitOnce (tests of the queue's
	// bounds, which want jobs to stay queued).
	manualAdmission bool
	// noDispatch leaves admitted jobs alone (tests, benchmarks of submit).
	noDispatch bool
}

// Plane is the control plane: it stores intent, admits fairly within the
// bounds, dispatches to runtimes through River, and recovers jobs whose
// owner died.
type Plane struct {
	c      Config
	st     *store.Store // c.Store's
	q      queue
	wakeCh chan struct{}
	wg     sync.WaitGroup
	cancel context.CancelFunc
	rr     sync.Map // pool -> *int (round robin)
	aborts sync.Map // job id -> context.CancelCauseFunc of its running commands
	// streams counts the output streams open (InFlightBytes is shared
	// among them).
	streams atomic.Int64
}

// New makes a plane on c.Store; Start runs it.
func New(ctx context.Context, c Config) (*Plane, error) {
	if c.Store == nil || c.Config == nil {
		return nil, errors.New("control: a store and a config source are required")
	}
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
		c.ID = fmt.Sprintf("%s:%d:%s", h, os.Getpid(), randHex(3))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Events = c.Events.WithDefaults()
	c.Store.inner.SetEventConfig(c.Events)
	if err := newTelemetry(ctx, &c); err != nil {
		return nil, err
	}
	p := &Plane{c: c, st: c.Store.inner, wakeCh: make(chan struct{}, 1)}
	workers := river.NewWorkers()
	river.AddWorker(workers, &dispatchWorker{p: p})
	if c.noDispatch {
		workers = nil
	}
	q, err := openQueue(ctx, c.Store.inner, queueConfig{workers: c.MaxActive, maxAttempts: c.DispatchAttempts, logger: c.Logger, id: c.ID}, workers)
	if err != nil {
		return nil, err
	}
	p.q = q
	return p, nil
}

// Start runs admission, the recoverer and River's workers until Stop.
func (p *Plane) Start(ctx context.Context) error {
	ctx, p.cancel = context.WithCancel(ctx)
	if !p.c.noDispatch {
		if err := p.q.start(ctx); err != nil {
			return fmt.Errorf("control: start queue: %w", err)
		}
	}
	p.wg.Add(4)
	go func() { defer p.wg.Done(); p.admitLoop(ctx) }()
	go func() { defer p.wg.Done(); p.recoverLoop(ctx) }()
	go func() { defer p.wg.Done(); p.retentionLoop(ctx) }() // events_store.go
	go func() { defer p.wg.Done(); p.deliveryLoop(ctx) }()  // delivery.go
	return nil
}

// Stop stops taking work, waits for River's running jobs (up to ctx) and
// closes the queue. Jobs still running keep their lease and are recovered
// by the next plane.
func (p *Plane) Stop(ctx context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	var err error
	if !p.c.noDispatch {
		err = p.q.stop(ctx)
	}
	p.q.close()
	return err
}

func (p *Plane) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newJobID(now time.Time) string { return fmt.Sprintf("j-%011x%s", now.UnixMilli(), randHex(5)) }

var keyRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// Submit stores a job for tenant and returns it; created is false when the
// idempotency key named an existing job (which is returned). Errors:
// ErrBadRequest, ErrForbidden (a 4xx each, nothing stored), *LimitError
// (429), ErrConflict (the key was used for another request).
func (p *Plane) Submit(ctx context.Context, tenant string, spec controlapi.Spec) (*controlapi.Job, bool, error) {
	return p.submit(ctx, tenant, "", spec)
}

// submit is Submit; token, when set, is the id of a token whose revocation
// the storing transaction reads (Store.authenticateSubmit).
func (p *Plane) submit(ctx context.Context, tenant, token string, spec controlapi.Spec) (*controlapi.Job, bool, error) {
	now := time.Now().UTC()
	if spec.IdempotencyKey == "" {
		spec.IdempotencyKey = "auto-" + randHex(12)
	} else if !keyRE.MatchString(spec.IdempotencyKey) {
		return nil, false, fmt.Errorf("%w: idempotency key %q: want 1 to 128 of A-Z a-z 0-9 . _ : -", ErrBadRequest, spec.IdempotencyKey)
	}
	if err := checkCommands(spec.Commands); err != nil {
		return nil, false, err
	}
	if spec.DeadlineSeconds < 0 || spec.CommandTimeoutSeconds < 0 {
		return nil, false, fmt.Errorf("%w: deadlineSeconds and commandTimeoutSeconds must not be negative", ErrBadRequest)
	}
	cfg, err := p.c.Config.Current(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%w: config repository: %v", ErrUnavailable, err)
	}
	t, ok := cfg.Tenants[tenant]
	if !ok {
		return nil, false, fmt.Errorf("%w: tenant %s is not declared in the config repository (tenants/%s.yaml at %s)", ErrForbidden, tenant, tenant, short(cfg.Revision))
	}
	if _, ok := p.c.Runtimes[spec.Pool]; !ok || spec.Pool == "" {
		return nil, false, fmt.Errorf("%w: unknown pool %q: no runtime of this control plane serves it", ErrBadRequest, spec.Pool)
	}
	prof, ok := cfg.Profiles[spec.Profile]
	if !ok {
		return nil, false, fmt.Errorf("%w: unknown profile %q (no profiles/%s.yaml at config revision %s)", ErrBadRequest, spec.Profile, spec.Profile, short(cfg.Revision))
	}
	if err := cfg.Authorize(tenant, spec.Profile, spec.Pool); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	lim, err := limitsOf(spec, prof)
	if err != nil {
		return nil, false, err
	}
	j := &controlapi.Job{
		ID: newJobID(now), Tenant: tenant, IdempotencyKey: spec.IdempotencyKey, Pool: spec.Pool,
		Profile:        controlapi.ProfileRef{Name: spec.Profile, Path: prof.Path, Revision: prof.Revision, Digest: prof.Digest},
		ConfigRevision: cfg.Revision, Commands: spec.Commands, Limits: lim, State: controlapi.Queued, Reason: "submitted", CreatedAt: now,
	}
	sub := submission{Job: j, Hash: requestHash(spec), TenantBound: t.Value.QueueBound, GlobalBound: p.c.QueueBound, Budget: -1, Profile: prof.Raw, Token: token}
	sub.Admit = p.inlineAdmission(ctx, cfg)
	if sub.TenantBound <= 0 {
		sub.TenantBound = 1
	}
	if cfg.Pricing != nil {
		j.Cost.Currency, j.Cost.PricingRevision = cfg.Pricing.Value.Currency, cfg.Pricing.Revision
		if r, ok := cfg.Pricing.Value.Rate(spec.Pool); ok {
			j.Cost.Known, j.Cost.RatePerHour = true, r.Active
			j.Cost.WorstCase = tenancy.WorstCase(r, time.Duration(lim.Deadline))
		}
	}
	if b := t.Value.Budget; b != nil {
		if !j.Cost.Known {
			return nil, false, fmt.Errorf("%w: pool %s has no price in pricing.yaml at %s, so tenant %s's budget cannot be checked", ErrForbidden, spec.Pool, short(cfg.Revision), tenant)
		}
		sub.Budget, sub.PeriodStart = b.Amount, b.PeriodStart(now)
	}
	if le := p.st.OverBound(ctx, sub); le != nil {
		if token != "" { // a revoked token learns nothing but that
			if live, err := p.st.TokenLive(ctx, token); err != nil || !live {
				return nil, false, cmp.Or(err, ErrUnauthenticated)
			}
		}
		return nil, false, le
	}
	o := p.st.Insert(ctx, sub)
	if o.Err == nil && o.Created && !o.AdmissionRan {
		p.wake() // stored without admission (alone, after its batch failed): admission looks now
	}
	return o.Job, o.Created, o.Err
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func checkCommands(cmds [][]string) error {
	if len(cmds) == 0 {
		return fmt.Errorf("%w: commands: at least one command is required", ErrBadRequest)
	}
	if len(cmds) > 64 {
		return fmt.Errorf("%w: commands: %d commands, at most 64", ErrBadRequest, len(cmds))
	}
	size := 0
	for i, c := range cmds {
		if len(c) == 0 || c[0] == "" {
			return fmt.Errorf("%w: commands[%d]: empty command", ErrBadRequest, i)
		}
		for _, a := range c {
			size += len(a)
		}
	}
	if size > 256<<10 {
		return fmt.Errorf("%w: commands: %d bytes of arguments, at most 256 KiB", ErrBadRequest, size)
	}
	return nil
}

func limitsOf(spec controlapi.Spec, prof tenancy.Versioned[tenancy.Profile]) (controlapi.Limits, error) {
	pr := prof.Value
	d := pr.MaxDuration
	if spec.DeadlineSeconds > 0 {
		d = time.Duration(spec.DeadlineSeconds * float64(time.Second))
		if d > pr.MaxDuration {
			return controlapi.Limits{}, fmt.Errorf("%w: deadline %s exceeds profile %s's maxDuration %s (%s at %s)", ErrBadRequest, d, pr.Name, pr.MaxDuration, prof.Path, short(prof.Revision))
		}
	}
	ct := d
	if pr.MaxCommandDuration > 0 && pr.MaxCommandDuration < ct {
		ct = pr.MaxCommandDuration
	}
	if spec.CommandTimeoutSeconds > 0 {
		want := time.Duration(spec.CommandTimeoutSeconds * float64(time.Second))
		if want > ct {
			return controlapi.Limits{}, fmt.Errorf("%w: command timeout %s exceeds what profile %s allows (%s, %s at %s)", ErrBadRequest, want, pr.Name, ct, prof.Path, short(prof.Revision))
		}
		ct = want
	}
	return controlapi.Limits{Deadline: controlapi.Duration(d), CommandTimeout: controlapi.Duration(ct), MaxOutputBytes: pr.MaxOutputBytes, MaxOutputLines: pr.MaxOutputLines}, nil
}

// requestHash identifies a request's content, for idempotency keys reused
// with other content.
func requestHash(s controlapi.Spec) string {
	s.IdempotencyKey = ""
	b, _ := json.Marshal(s)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Get returns a job of tenant ("" : any, for operators).
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
	return j, p.deliveryView(ctx, j) // delivery_view.go
}

// Profile interprets a job with its profile as it was when it was
// submitted, even after the file changed or was deleted.
func (p *Plane) Profile(ctx context.Context, j *controlapi.Job) (*controlapi.JobProfile, error) {
	out := &controlapi.JobProfile{Ref: j.Profile}
	v, err := p.c.Config.ProfileAt(ctx, j.Profile.Revision, j.Profile.Name)
	if err == nil && v != nil && v.Digest == j.Profile.Digest {
		out.Profile, out.Source = wireProfile(v.Value), "config repository at "+short(j.Profile.Revision)
	} else {
		raw, serr := p.st.StoredProfile(ctx, j.Profile.Digest)
		if serr != nil {
			return nil, fmt.Errorf("job %s: profile %s at %s: %v; stored copy: %w", j.ID, j.Profile.Name, short(j.Profile.Revision), err, serr)
		}
		pr, perr := tenancy.ParseProfile(j.Profile.Path, raw)
		if perr != nil {
			return nil, perr
		}
		out.Profile, out.Source = wireProfile(*pr), "stored at submission ("+j.Profile.Digest+")"
	}
	cfg, err := p.c.Config.Current(ctx)
	if err != nil {
		out.Current = "unknown: " + err.Error()
		return out, nil
	}
	switch cur, ok := cfg.Profiles[j.Profile.Name]; {
	case !ok:
		out.Current = "deleted at " + short(cfg.Revision)
	case cur.Digest != j.Profile.Digest:
		out.Current = fmt.Sprintf("changed at %s (digest %s)", short(cur.Revision), cur.Digest)
	default:
		out.Current = "unchanged"
	}
	return out, nil
}

// List lists jobs.
func (p *Plane) List(ctx context.Context, f ListFilter) ([]*controlapi.Job, error) {
	return p.st.List(ctx, f)
}

// Cancel cancels a job of tenant ("" : any): a queued or admitted job ends
// canceled at once; an allocating or running one is stopped by its owner
// (or the recoverer, if the owner is gone).
func (p *Plane) Cancel(ctx context.Context, tenant, id string) (*controlapi.Job, error) {
	if _, err := p.st.Get(ctx, tenant, id); err != nil {
		return nil, err
	}
	j, err := p.finish(ctx, id, func(j *controlapi.Job, l *lease) error {
		now := time.Now().UTC()
		if j.Cancellation == nil {
			j.Cancellation = &controlapi.Cancellation{RequestedAt: now}
		}
		c := j.Cancellation
		c.Fence++
		addStep(c, controlapi.StepRequest, controlapi.StepDone, fmt.Sprintf("cancel request #%d", c.Fence))
		j.CancelRequested = true
		switch j.State {
		case controlapi.Queued, controlapi.Admitted:
			if l.Owner != "" && l.Until.After(now) {
				return nil // its dispatcher is starting it: it ends it
			}
			cancelQueued(j, now)
		case controlapi.Allocating, controlapi.Running:
			// its owner stops the commands and carries the cleanup
			// through (or the recoverer, if the owner is gone)
			j.State, j.Reason, j.Detail = controlapi.Canceling, "canceling", "cancel requested: no new commands; the runner is signalled"
		}
		return nil
	})
	if err == nil {
		if abort, ok := p.aborts.Load(id); ok {
			abort.(context.CancelCauseFunc)(errCanceled)
		}
	}
	if err != nil {
		return nil, err
	}
	if j == nil {
		return p.st.Get(ctx, tenant, id)
	}
	p.wake()
	return j, nil
}

// failpoint blocks forever at the configured point (crash tests kill the
// process there).
func (p *Plane) failpoint(ctx context.Context, name string) {
	if p.c.Failpoint == name {
		p.c.Logger.Warn("failpoint reached", "name", name)
		<-ctx.Done()
	}
}

// inlineAdmission is admission run inside another transaction (a
// submission's, a finished job's) under cfg; nil when admission is left to
// admitOnce.
func (p *Plane) inlineAdmission(ctx context.Context, cfg *tenancy.Config) *batchAdmit {
	if p.c.manualAdmission {
		return nil
	}
	return &batchAdmit{Slots: slots{Max: p.c.MaxActive, Reserve: p.c.Reserve}, Limits: tenantLimits(cfg), Decide: func(j *controlapi.Job, l *lease) { p.decide(cfg, j, l) },
		After: func(js []*controlapi.Job) {
			if err := p.dispatchAdmitted(context.WithoutCancel(ctx), js); err != nil {
				p.c.Logger.Warn("admission", "err", err)
			}
		}}
}

// finish commits a job's change that may end it, admitting into the slot it
// frees in the same transaction.
func (p *Plane) finish(ctx context.Context, id string, f func(*controlapi.Job, *lease) error) (*controlapi.Job, error) {
	var ba *batchAdmit
	if cfg, err := p.c.Config.Current(ctx); err == nil {
		ba = p.inlineAdmission(ctx, cfg)
	}
	return p.st.UpdateAdmit(ctx, id, f, ba)
}
