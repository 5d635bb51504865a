package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"golang.org/x/time/rate"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/deliver"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// Config configures the output worker: it delivers each tenant's
// job events to the tenant's destinations (tenants/<name>.yaml), apart
// from the runs (a run never waits on a destination).
type Config struct {
	// Disabled turns the worker off (events still accumulate; a worker
	// started later delivers them).
	Disabled bool
	// Poll is how often destinations look for jobs with undelivered events
	// (default 200ms).
	Poll time.Duration
	// Lease is how long a (destination, job) stays with this worker
	// without renewal; after a crash another worker redelivers what was
	// not acknowledged (default 30s).
	Lease time.Duration
	// AttemptTimeout bounds one attempt (default 10s).
	AttemptTimeout time.Duration
	// BackoffBase and BackoffMax shape the waits between attempts
	// (defaults 500ms and 5m); RetryAfterCap bounds a destination's
	// Retry-After (default 10m).
	BackoffBase, BackoffMax, RetryAfterCap time.Duration
	// JobsPerDestination bounds the jobs one destination works at once
	// (default 8).
	JobsPerDestination int
	// Limits bound a message's text; longer text goes to an artifact.
	Limits deliver.Limits
	// PublicURL prefixes artifact links (default: a path only).
	PublicURL string
	// Client sends the attempts (default: a client with no redirects).
	Client *http.Client
}

// WithDefaults is c with the defaults where c says nothing.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Poll, 200*time.Millisecond)
	def(&c.Lease, 30*time.Second)
	def(&c.AttemptTimeout, 10*time.Second)
	def(&c.BackoffBase, 500*time.Millisecond)
	def(&c.BackoffMax, 5*time.Minute)
	def(&c.RetryAfterCap, 10*time.Minute)
	if c.JobsPerDestination <= 0 {
		c.JobsPerDestination = 8
	}
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c
}

// deliveryWorker runs one goroutine per destination and per (destination,
// job) it works.
type deliveryWorker struct {
	env   Env
	c     Config
	mu    sync.Mutex
	dests map[string]*destRunner
	wg    sync.WaitGroup
}

// destRunner delivers to one destination of one tenant.
type destRunner struct {
	w        *deliveryWorker
	tenant   string
	consumer string
	limiter  *rate.Limiter
	mu       sync.Mutex
	d        tenancy.Destination
	required []string // the tenant's destinations that require the result
	active   map[string]bool
}

// Env is what the output worker uses of the plane it runs in.
type Env struct {
	Store *store.Store
	// Current is the configuration in effect (tenants and their
	// destinations).
	Current func(context.Context) (*tenancy.Config, error)
	// Owner names this replica: it holds the consumers' leases.
	Owner   string
	Logger  *slog.Logger
	Metrics *telemetry.Metrics
	// Span starts a span of job j's trace and returns its end.
	Span func(ctx context.Context, j *controlapi.Job, name string, kv ...attribute.KeyValue) func(error, ...attribute.KeyValue)
}

// Run runs the output worker until ctx ends (at once when c.Disabled).
func Run(ctx context.Context, c Config, env Env) {
	if c.Disabled {
		return
	}
	w := &deliveryWorker{env: env, c: c.WithDefaults(), dests: map[string]*destRunner{}}
	defer w.wg.Wait()
	t := time.NewTicker(w.c.Poll)
	defer t.Stop()
	for {
		if cfg, err := env.Current(ctx); err == nil {
			w.sync(ctx, cfg)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync updates the destinations from the configuration and starts work on
// the jobs that have events to deliver.
func (w *deliveryWorker) sync(ctx context.Context, cfg *tenancy.Config) {
	for name, t := range cfg.Tenants {
		var required []string
		for _, d := range t.Value.Destinations {
			if d.RequiresResult {
				required = append(required, d.Name)
			}
		}
		for _, d := range t.Value.Destinations {
			key := name + "/" + d.Name
			w.mu.Lock()
			r := w.dests[key]
			if r == nil {
				r = &destRunner{w: w, tenant: name, consumer: "delivery:" + key, active: map[string]bool{},
					limiter: rate.NewLimiter(rate.Limit(d.RatePerSecond), max(1, int(d.RatePerSecond)))}
				w.dests[key] = r
			}
			w.mu.Unlock()
			r.mu.Lock()
			if r.d.RatePerSecond != d.RatePerSecond {
				r.limiter.SetLimit(rate.Limit(d.RatePerSecond))
				r.limiter.SetBurst(max(1, int(d.RatePerSecond)))
			}
			r.d, r.required = d, required
			r.mu.Unlock()
			r.poll(ctx)
		}
	}
}

func (r *destRunner) config() (tenancy.Destination, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d, r.required
}

// poll starts a goroutine for each job with undelivered events, up to
// JobsPerDestination at once.
func (r *destRunner) poll(ctx context.Context) {
	r.mu.Lock()
	free := r.w.c.JobsPerDestination - len(r.active)
	r.mu.Unlock()
	if free <= 0 {
		return
	}
	jobs, err := r.w.env.Store.PendingJobsOf(ctx, r.consumer, r.tenant, 4*r.w.c.JobsPerDestination)
	if err != nil {
		if ctx.Err() == nil {
			r.w.env.Logger.Warn("delivery", "destination", r.consumer, "err", err)
		}
		return
	}
	for _, id := range jobs {
		r.mu.Lock()
		if r.active[id] || len(r.active) >= r.w.c.JobsPerDestination {
			r.mu.Unlock()
			continue
		}
		r.active[id] = true
		r.mu.Unlock()
		r.w.wg.Add(1)
		go func() {
			defer r.w.wg.Done()
			err := r.run(ctx, id)
			if err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrConflict) {
				r.w.env.Logger.Warn("delivery", "destination", r.consumer, "job", id, "err", err)
			}
			r.mu.Lock()
			delete(r.active, id)
			r.mu.Unlock()
		}()
	}
}

// run delivers a job's events to the destination in sequence order: each
// event's receipt is stored, then acknowledged.
func (r *destRunner) run(ctx context.Context, id string) error {
	s, owner := r.w.env.Store, r.w.env.Owner
	j, err := s.Get(ctx, "", id)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		d, err := s.Consume(ctx, r.consumer, owner, id, r.w.c.Lease, 64)
		if err != nil {
			return err
		}
		if len(d.Events) == 0 {
			return nil
		}
		renewed := time.Now() // Consume took the lease
		for i, e := range d.Events {
			var next *controlapi.Event
			if i+1 < len(d.Events) {
				next = &d.Events[i+1]
			}
			if err := r.deliverOne(ctx, j, e, next, &renewed); err != nil {
				return err
			}
			if err := s.Ack(ctx, r.consumer, owner, id, e.Seq); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// deliverOne takes one event to its end at the destination: not wanted
// (nothing stored), already receipted (a redelivery after a crash),
// collapsed, delivered or failed with the budget spent. It returns an
// error only when it must stop (ctx, the database, a lost lease).
func (r *destRunner) deliverOne(ctx context.Context, j *controlapi.Job, e controlapi.Event, next *controlapi.Event, renewed *time.Time) (err error) {
	s := r.w.env.Store
	d, required := r.config()
	if !d.Wants(string(e.Kind)) {
		return nil
	}
	key := deliver.Key(j.ID, e.Seq, d.Name)
	if rec, err := s.Receipt(ctx, j.ID, d.Name, e.Seq); err != nil || rec != nil {
		if rec != nil && rec.Kind == controlapi.KindResult && rec.Outcome == controlapi.ReceiptDelivered && d.RequiresResult {
			return s.PutReceipt(ctx, j.ID, *rec, required) // a crash between receipt and stamp cannot happen (one tx); repeat-safe anyway
		}
		return err
	}
	if e.Kind == controlapi.KindStatus && next != nil && next.Kind == controlapi.KindStatus {
		return s.PutReceipt(ctx, j.ID, controlapi.Receipt{Destination: d.Name, Seq: e.Seq, Kind: e.Kind, Outcome: controlapi.ReceiptCollapsed, Key: key,
			Detail: fmt.Sprintf("superseded by status update %d", next.Seq), At: time.Now().UTC()}, nil)
	}
	body, err := r.message(ctx, j, e, d, key)
	if err != nil {
		return err
	}
	attempts := 0
	if p, err := s.GetProgress(ctx, j.ID, d.Name); err != nil {
		return err
	} else if p != nil && p.Seq == e.Seq {
		attempts = p.Attempts // the budget survives a restart
		if wait := time.Until(p.Next); wait > 0 {
			if err := sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
	outcome := controlapi.ReceiptFailed
	if e.Kind == controlapi.KindResult || e.Kind == controlapi.KindProduct {
		// the job's trace shows its artifacts' deliveries (its output
		// events' would flood it)
		end := r.w.env.Span(ctx, j, "event delivery", attribute.String("destination", d.Name), attribute.Int64("seq", e.Seq), attribute.String("kind", string(e.Kind)))
		defer func() { end(err, attribute.Int("attempts", attempts), attribute.String("outcome", outcome)) }()
	}
	var last deliver.Outcome
	for attempts < d.MaxAttempts {
		if err := r.limiter.Wait(ctx); err != nil {
			return err
		}
		// renew the lease once a third of it is spent: a slow destination
		// must not hand the job to another worker while this one still tries
		if time.Since(*renewed) > r.w.c.Lease/3 {
			if _, err := s.Consume(ctx, r.consumer, r.w.env.Owner, j.ID, r.w.c.Lease, 0); err != nil {
				return err
			}
			*renewed = time.Now()
		}
		attempts++
		secret, serr := d.SecretRef.Read()
		if serr != nil {
			last = deliver.Outcome{Retry: true, Err: serr}
		} else {
			actx, cancel := context.WithTimeout(ctx, r.w.c.AttemptTimeout)
			last = deliver.Post(actx, r.w.c.Client, d.URL, key, secret, body, time.Now())
			cancel()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if last.Delivered {
			outcome = controlapi.ReceiptDelivered
			if e.Kind == controlapi.KindResult || e.Kind == controlapi.KindProduct {
				r.w.env.Metrics.ArtifactExported(ctx, j.Pool, int64(len(body)))
			}
			return s.PutReceipt(ctx, j.ID, controlapi.Receipt{Destination: d.Name, Seq: e.Seq, Kind: e.Kind, Outcome: controlapi.ReceiptDelivered,
				HTTPStatus: last.Status, RemoteID: last.ID, Attempts: attempts, Key: key, At: time.Now().UTC()}, required)
		}
		if !last.Retry || attempts >= d.MaxAttempts {
			break
		}
		wait := deliver.Backoff(attempts, r.w.c.BackoffBase, r.w.c.BackoffMax, last.RetryAfter, r.w.c.RetryAfterCap)
		if err := s.PutProgress(ctx, j.ID, d.Name, store.Progress{Seq: e.Seq, Attempts: attempts, Next: time.Now().Add(wait),
			LastErr: fmt.Sprintf("attempt %d of a budget of %d: %v", attempts, d.MaxAttempts, last.Err)}); err != nil {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
	detail := fmt.Sprintf("%d attempts, the budget of %d spent: %v", attempts, d.MaxAttempts, last.Err)
	if !last.Retry {
		detail = fmt.Sprintf("refused after %d attempts (budget %d): %v", attempts, d.MaxAttempts, last.Err)
	}
	return s.PutReceipt(ctx, j.ID, controlapi.Receipt{Destination: d.Name, Seq: e.Seq, Kind: e.Kind, Outcome: controlapi.ReceiptFailed,
		HTTPStatus: last.Status, Attempts: attempts, Key: key, Detail: detail, At: time.Now().UTC()}, nil)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// message builds the body of event e for destination d; text too long
// goes to an artifact first.
func (r *destRunner) message(ctx context.Context, j *controlapi.Job, e controlapi.Event, d tenancy.Destination, key string) ([]byte, error) {
	m := controlapi.Message{ID: key, Tenant: j.Tenant, Destination: d.Name, Job: j.ID, Seq: e.Seq, Kind: e.Kind, At: e.At,
		Audit: controlapi.MessageAudit{Job: j.ID, Seq: e.Seq, Events: fmt.Sprintf("/v1/jobs/%s/events?after=%d", j.ID, e.Seq-1)}}
	var raw []byte
	switch e.Kind {
	case controlapi.KindStdout, controlapi.KindStderr:
		o, err := e.Output()
		if err != nil {
			return nil, fmt.Errorf("job %s event %d: %w", j.ID, e.Seq, err)
		}
		raw = o.Bytes()
	case controlapi.KindState:
		var st controlapi.StateData
		_ = json.Unmarshal(e.Data, &st)
		raw = []byte(string(st.State))
		if st.Reason != "" {
			raw = fmt.Appendf(raw, ": %s", st.Reason)
		}
	case controlapi.KindResult:
		var rd controlapi.ResultData
		_ = json.Unmarshal(e.Data, &rd)
		m.Result = &controlapi.MessageResult{State: rd.State, Reason: rd.Reason, ExitCode: rd.ExitCode}
		raw = []byte(rd.Output)
	default: // status, tool_call, file, diff, product: the data as the run wrote it
		raw = e.Data
	}
	ft := deliver.Filter(raw, r.w.c.Limits)
	m.Text, m.Redacted = ft.Text, wireRedactions(ft.Redactions)
	if ft.Truncated {
		name := fmt.Sprintf("event-%d.txt", e.Seq)
		if err := r.w.env.Store.PutArtifact(ctx, j.ID, name, []byte(ft.Full)); err != nil {
			return nil, err
		}
		m.Truncated = &controlapi.MessageTruncation{DroppedBytes: ft.DroppedBytes, DroppedLines: ft.DroppedLines,
			Artifact: fmt.Sprintf("%s/v1/jobs/%s/artifacts/%s", r.w.c.PublicURL, j.ID, name)}
	}
	return json.Marshal(m)
}

// wireRedactions are a filter's redactions as a message names them.
func wireRedactions(rs []scan.Redaction) []controlapi.Redaction {
	if rs == nil {
		return nil
	}
	out := make([]controlapi.Redaction, len(rs))
	for i, r := range rs {
		out[i] = controlapi.Redaction{Rule: string(r.Rule), Line: r.Line}
	}
	return out
}
