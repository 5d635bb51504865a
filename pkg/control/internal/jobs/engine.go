package jobs

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
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// Source gives the configuration in effect (tenants, profiles, prices)
// and profiles as they were at an older revision.
type Source interface {
	Current(ctx context.Context) (*tenancy.Config, error)
	ProfileAt(ctx context.Context, revision, name string) (*tenancy.Versioned[tenancy.Profile], error)
}

// Runtime is an execution plane jobs are dispatched to, through its HTTP
// API.
type Runtime struct {
	// Name is what job records say (never the URL's credentials).
	Name   string
	Client *runtimeapi.Client
}

// Config configures an Engine. Every field is required but the test
// hooks at the end; the plane (pkg/control's New) fills in the defaults
// its own Config documents.
type Config struct {
	Store  *store.Store
	Config Source
	// Runtimes serve each pool; a pool not here is unknown.
	Runtimes map[string][]Runtime
	// MaxActive bounds the jobs admitted, allocating or running at once;
	// Reserve is what a tenant at or over its fair share leaves free of
	// them; QueueBound bounds the queued jobs of all tenants.
	MaxActive, Reserve, QueueBound int
	// DispatchAttempts is the retry budget of a failing dispatch; Lease is
	// how long a dead owner holds a job; Grace is how long a command gets
	// between SIGTERM and SIGKILL when the job's deadline stops it.
	DispatchAttempts int
	Lease, Grace     time.Duration
	// Events bounds the output streams of running jobs.
	Events store.EventConfig
	// ID names this replica in leases.
	ID      string
	Logger  *slog.Logger
	Metrics *telemetry.Metrics
	Tracing *telemetry.Tracing
	// Failpoint names a point where the engine blocks forever, for crash
	// tests that kill it there (after-claim, cancel.signalled,
	// cancel.released).
	Failpoint string

	// NullDispatch, with NoDispatch, gets each admitted job instead of
	// River (benchmarks: a null dispatcher).
	NullDispatch func(id string)
	// ManualAdmission leaves admission to AdmitOnce (tests of the queue's
	// bounds, which want jobs to stay queued).
	ManualAdmission bool
	// NoDispatch leaves admitted jobs alone (tests, benchmarks of submit).
	NoDispatch bool
	// EnqueueOnly hands admitted jobs to River, as in production, but runs
	// no River worker to take them (benchmark B8a: a submission's measured
	// path includes its River enqueue, and nothing is dispatched).
	EnqueueOnly bool
}

// Engine runs jobs: it stores intent, admits fairly within the bounds,
// dispatches to runtimes through River, and recovers jobs whose owner
// died.
type Engine struct {
	c      Config
	st     *store.Store
	q      queue
	wakeCh chan struct{}
	wg     sync.WaitGroup
	cancel context.CancelFunc
	rr     sync.Map // pool -> *int (round robin)
	aborts sync.Map // job id -> context.CancelCauseFunc of its running commands
	// streams counts the output streams open (InFlightBytes is shared
	// among them).
	streams atomic.Int64
	// self is this control plane as it measured itself, sent with each
	// claim (the run manifest's served_by.control_plane).
	self *runmanifest.Process
}

// New makes an engine on c.Store; Start runs it.
func New(ctx context.Context, c Config) (*Engine, error) {
	switch {
	case c.Store == nil || c.Config == nil:
		return nil, errors.New("jobs: a store and a config source are required")
	case c.MaxActive <= 0 || c.QueueBound <= 0 || c.DispatchAttempts <= 0 || c.Lease <= 0 || c.Grace <= 0:
		return nil, fmt.Errorf("jobs: max active %d, queue bound %d, dispatch attempts %d, lease %s and grace %s must be positive",
			c.MaxActive, c.QueueBound, c.DispatchAttempts, c.Lease, c.Grace)
	case c.ID == "" || c.Logger == nil || c.Metrics == nil || c.Tracing == nil:
		return nil, errors.New("jobs: a replica id, a logger, metrics and tracing are required")
	}
	e := &Engine{c: c, st: c.Store, wakeCh: make(chan struct{}, 1)}
	self, err := runmanifest.Self()
	if err != nil {
		c.Logger.Warn("identity", "err", err)
	}
	e.self = &self
	workers := river.NewWorkers()
	river.AddWorker(workers, &dispatchWorker{e: e})
	if c.NoDispatch || c.EnqueueOnly {
		workers = nil
	}
	q, err := openQueue(ctx, c.Store, queueConfig{workers: c.MaxActive, maxAttempts: c.DispatchAttempts, logger: c.Logger, id: c.ID}, workers)
	if err != nil {
		return nil, err
	}
	e.q = q
	if err := c.Metrics.ObserveQueue(e.queueDepth); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return e, nil
}

// tiers lists the tenant tiers of cfg, sorted, each once.
func tiers(cfg *tenancy.Config) []string {
	var out []string
	for _, t := range cfg.Tenants {
		if !slices.Contains(out, t.Value.Tier) {
			out = append(out, t.Value.Tier)
		}
	}
	slices.Sort(out)
	return out
}

// tierOf is tenant's tier in cfg (tenancy.DefaultTier for a tenant no
// longer declared).
func tierOf(cfg *tenancy.Config, tenant string) string {
	if t, ok := cfg.Tenants[tenant]; ok {
		return t.Value.Tier
	}
	return tenancy.DefaultTier
}

// queueDepth samples queue_depth: the queued jobs of every configured tier
// (0 included), summed over its tenants. It reads the configuration at a
// scrape, not at the engine's start (a plane starts before its config
// repository answers).
func (e *Engine) queueDepth(ctx context.Context) ([]telemetry.QueueSample, error) {
	cfg, err := e.c.Config.Current(ctx)
	if err != nil {
		return nil, err
	}
	queued, err := e.st.QueuedByTenant(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]int64{}
	for _, tier := range tiers(cfg) {
		by[tier] = 0
		e.c.Metrics.StartTier(ctx, tier) // arrivals at zero from the first scrape, for tiers added later too
	}
	for tenant, n := range queued {
		by[tierOf(cfg, tenant)] += n
	}
	out := make([]telemetry.QueueSample, 0, len(by))
	for tier, n := range by {
		out = append(out, telemetry.QueueSample{Tier: tier, Queued: n})
	}
	slices.SortFunc(out, func(a, b telemetry.QueueSample) int { return strings.Compare(a.Tier, b.Tier) })
	return out, nil
}

// Start runs admission, the recoverer and River's workers until Stop.
func (e *Engine) Start(ctx context.Context) error {
	ctx, e.cancel = context.WithCancel(ctx)
	if !e.c.NoDispatch && !e.c.EnqueueOnly {
		if err := e.q.start(ctx); err != nil {
			return fmt.Errorf("jobs: start queue: %w", err)
		}
	}
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.admitLoop(ctx) }()
	go func() { defer e.wg.Done(); e.recoverLoop(ctx) }()
	return nil
}

// Stop stops taking work, waits for River's running jobs (up to ctx) and
// closes the queue. Jobs still running keep their lease and are recovered
// by the next engine. An engine never started is closed.
func (e *Engine) Stop(ctx context.Context) error {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	var err error
	if !e.c.NoDispatch && !e.c.EnqueueOnly && e.cancel != nil {
		err = e.q.stop(ctx)
	}
	e.q.close()
	return err
}

func (e *Engine) wake() {
	select {
	case e.wakeCh <- struct{}{}:
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
// idempotency key named an existing job (which is returned). Token, when
// set, is the id of a token whose revocation the storing transaction reads
// (store.Store.AuthenticateSubmit); a revoked one is store.ErrUnauthenticated.
// Errors: store.ErrBadRequest, store.ErrForbidden (a 4xx each, nothing stored),
// *LimitError (429), store.ErrConflict (the key was used for another request).
func (e *Engine) Submit(ctx context.Context, tenant, token string, spec controlapi.Spec) (*controlapi.Job, bool, error) {
	now := time.Now().UTC()
	if spec.IdempotencyKey == "" {
		spec.IdempotencyKey = "auto-" + randHex(12)
	} else if !keyRE.MatchString(spec.IdempotencyKey) {
		return nil, false, fmt.Errorf("%w: idempotency key %q: want 1 to 128 of A-Z a-z 0-9 . _ : -", store.ErrBadRequest, spec.IdempotencyKey)
	}
	if err := checkCommands(spec.Commands); err != nil {
		return nil, false, err
	}
	if spec.DeadlineSeconds < 0 || spec.CommandTimeoutSeconds < 0 {
		return nil, false, fmt.Errorf("%w: deadlineSeconds and commandTimeoutSeconds must not be negative", store.ErrBadRequest)
	}
	cfg, err := e.c.Config.Current(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%w: config repository: %v", store.ErrUnavailable, err)
	}
	t, ok := cfg.Tenants[tenant]
	if !ok {
		return nil, false, fmt.Errorf("%w: tenant %s is not declared in the config repository (tenants/%s.yaml at %s)", store.ErrForbidden, tenant, tenant, short(cfg.Revision))
	}
	if _, ok := e.c.Runtimes[spec.Pool]; !ok || spec.Pool == "" {
		return nil, false, fmt.Errorf("%w: unknown pool %q: no runtime of this control plane serves it", store.ErrBadRequest, spec.Pool)
	}
	prof, ok := cfg.Profiles[spec.Profile]
	if !ok {
		return nil, false, fmt.Errorf("%w: unknown profile %q (no profiles/%s.yaml at config revision %s)", store.ErrBadRequest, spec.Profile, spec.Profile, short(cfg.Revision))
	}
	if err := cfg.Authorize(tenant, spec.Profile, spec.Pool); err != nil {
		return nil, false, fmt.Errorf("%w: %v", store.ErrForbidden, err)
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
	sub := submission{Job: j, Hash: requestHash(spec), TenantBound: t.Value.QueueBound, GlobalBound: e.c.QueueBound, Budget: -1, Profile: prof.Raw, Token: token}
	sub.Admit = e.inlineAdmission(ctx, cfg)
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
			return nil, false, fmt.Errorf("%w: pool %s has no price in pricing.yaml at %s, so tenant %s's budget cannot be checked", store.ErrForbidden, spec.Pool, short(cfg.Revision), tenant)
		}
		sub.Budget, sub.PeriodStart = b.Amount, b.PeriodStart(now)
	}
	if le := e.st.OverBound(ctx, sub); le != nil {
		if token != "" { // a revoked token learns nothing but that
			if live, err := e.st.TokenLive(ctx, token); err != nil || !live {
				return nil, false, cmp.Or(err, store.ErrUnauthenticated)
			}
		}
		return nil, false, le
	}
	o := e.st.Insert(ctx, sub)
	if o.Err == nil && o.Created {
		e.c.Metrics.JobArrived(ctx, t.Value.Tier)
	}
	if o.Err == nil && o.Created && !o.AdmissionRan {
		e.wake() // stored without admission (alone, after its batch failed): admission looks now
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
		return fmt.Errorf("%w: commands: at least one command is required", store.ErrBadRequest)
	}
	if len(cmds) > 64 {
		return fmt.Errorf("%w: commands: %d commands, at most 64", store.ErrBadRequest, len(cmds))
	}
	size := 0
	for i, c := range cmds {
		if len(c) == 0 || c[0] == "" {
			return fmt.Errorf("%w: commands[%d]: empty command", store.ErrBadRequest, i)
		}
		for _, a := range c {
			size += len(a)
		}
	}
	if size > 256<<10 {
		return fmt.Errorf("%w: commands: %d bytes of arguments, at most 256 KiB", store.ErrBadRequest, size)
	}
	return nil
}

func limitsOf(spec controlapi.Spec, prof tenancy.Versioned[tenancy.Profile]) (controlapi.Limits, error) {
	pr := prof.Value
	d := pr.MaxDuration
	if spec.DeadlineSeconds > 0 {
		d = time.Duration(spec.DeadlineSeconds * float64(time.Second))
		if d > pr.MaxDuration {
			return controlapi.Limits{}, fmt.Errorf("%w: deadline %s exceeds profile %s's maxDuration %s (%s at %s)", store.ErrBadRequest, d, pr.Name, pr.MaxDuration, prof.Path, short(prof.Revision))
		}
	}
	ct := d
	if pr.MaxCommandDuration > 0 && pr.MaxCommandDuration < ct {
		ct = pr.MaxCommandDuration
	}
	if spec.CommandTimeoutSeconds > 0 {
		want := time.Duration(spec.CommandTimeoutSeconds * float64(time.Second))
		if want > ct {
			return controlapi.Limits{}, fmt.Errorf("%w: command timeout %s exceeds what profile %s allows (%s, %s at %s)", store.ErrBadRequest, want, pr.Name, ct, prof.Path, short(prof.Revision))
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

// Profile interprets a job with its profile as it was when it was
// submitted, even after the file changed or was deleted.
func (e *Engine) Profile(ctx context.Context, j *controlapi.Job) (*controlapi.JobProfile, error) {
	out := &controlapi.JobProfile{Ref: j.Profile}
	v, err := e.c.Config.ProfileAt(ctx, j.Profile.Revision, j.Profile.Name)
	if err == nil && v != nil && v.Digest == j.Profile.Digest {
		out.Profile, out.Source = wireProfile(v.Value), "config repository at "+short(j.Profile.Revision)
	} else {
		raw, serr := e.st.StoredProfile(ctx, j.Profile.Digest)
		if serr != nil {
			return nil, fmt.Errorf("job %s: profile %s at %s: %v; stored copy: %w", j.ID, j.Profile.Name, short(j.Profile.Revision), err, serr)
		}
		pr, perr := tenancy.ParseProfile(j.Profile.Path, raw)
		if perr != nil {
			return nil, perr
		}
		out.Profile, out.Source = wireProfile(*pr), "stored at submission ("+j.Profile.Digest+")"
	}
	cfg, err := e.c.Config.Current(ctx)
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

// Cancel cancels a job of tenant ("" : any): a queued or admitted job ends
// canceled at once; an allocating or running one is stopped by its owner
// (or the recoverer, if the owner is gone).
func (e *Engine) Cancel(ctx context.Context, tenant, id, reason, by string) (*controlapi.Job, error) {
	if _, err := e.st.Get(ctx, tenant, id); err != nil {
		return nil, err
	}
	j, err := e.Finish(ctx, id, func(j *controlapi.Job, l *lease) error {
		now := time.Now().UTC()
		if j.Cancellation == nil {
			j.Cancellation = &controlapi.Cancellation{RequestedAt: now}
		}
		c := j.Cancellation
		c.Fence++
		detail := fmt.Sprintf("cancel request #%d", c.Fence)
		if reason != "" {
			c.Reason, c.RequestedBy = reason, by
			detail += " by token " + by + ": " + reason
		}
		addStep(c, controlapi.StepRequest, controlapi.StepDone, detail)
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
		if abort, ok := e.aborts.Load(id); ok {
			abort.(context.CancelCauseFunc)(errCanceled)
		}
	}
	if err != nil {
		return nil, err
	}
	if j == nil {
		return e.st.Get(ctx, tenant, id)
	}
	e.wake()
	return j, nil
}

// failpoint blocks forever at the configured point (crash tests kill the
// process there).
func (e *Engine) failpoint(ctx context.Context, name string) {
	if e.c.Failpoint == name {
		e.c.Logger.Warn("failpoint reached", "name", name)
		<-ctx.Done()
	}
}

// inlineAdmission is admission run inside another transaction (a
// submission's, a finished job's) under cfg; nil when admission is left to
// AdmitOnce.
func (e *Engine) inlineAdmission(ctx context.Context, cfg *tenancy.Config) *batchAdmit {
	if e.c.ManualAdmission {
		return nil
	}
	return &batchAdmit{Slots: slots{Max: e.c.MaxActive, Reserve: e.c.Reserve}, Limits: tenantLimits(cfg), Decide: func(j *controlapi.Job, l *lease) { e.decide(cfg, j, l) },
		After: func(js []*controlapi.Job) {
			if err := e.dispatchAdmitted(context.WithoutCancel(ctx), cfg, js); err != nil {
				e.c.Logger.Warn("admission", "err", err)
			}
		}}
}

// Finish commits a job's change that may end it, admitting into the slot it
// frees in the same transaction.
func (e *Engine) Finish(ctx context.Context, id string, f func(*controlapi.Job, *lease) error) (*controlapi.Job, error) {
	var ba *batchAdmit
	if cfg, err := e.c.Config.Current(ctx); err == nil {
		ba = e.inlineAdmission(ctx, cfg)
	}
	return e.st.UpdateAdmit(ctx, id, f, ba)
}
