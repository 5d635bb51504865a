package canary

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// The steps of a round, in the order they run. Each is a bounded word: it
// is a metric label.
const (
	StepClaim     = "claim"
	StepIdentity  = "identity"
	StepApproved  = "egress_approved"
	StepDenied    = "egress_denied"
	StepWorkspace = "workspace"
	StepOutput    = "output"
	// StepCheckpoint checkpoints, suspends and resumes the claim (skipped
	// on a runtime that keeps no checkpoints): checkpoint.go.
	StepCheckpoint = "checkpoint"
	StepRelease    = "release"
)

// Steps are the steps of a round, in order.
var Steps = []string{StepClaim, StepIdentity, StepApproved, StepDenied, StepWorkspace, StepOutput, StepCheckpoint, StepRelease}

// Tenant is the tenant a canary's claims carry (in their run manifests).
const Tenant = "slipway-canary"

var (
	// ErrInvalid wraps every error about a canary's settings.
	ErrInvalid = errors.New("canary: invalid setting")
	// ErrInterrupted: the round was cut short by its context (the canary
	// stopping); it is not recorded.
	ErrInterrupted = errors.New("canary: round interrupted")
)

// Round is one canary round: what each step found, and the first step that
// failed. It is one line of the history.
type Round struct {
	Pool     string    `json:"pool"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Passed   bool      `json:"passed"`
	// FailedStep is the first step that failed ("" when the round passed);
	// Reason says why.
	FailedStep string `json:"failedStep,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// RunID, SandboxID, Generation and Warm are the claim's (empty when
	// the claim failed).
	RunID      string       `json:"runId,omitempty"`
	SandboxID  string       `json:"sandboxId,omitempty"`
	Generation string       `json:"generation,omitempty"`
	Warm       bool         `json:"warm,omitempty"`
	Steps      []StepResult `json:"steps"`
}

// StepResult is one step of a round.
type StepResult struct {
	Step string `json:"step"`
	// Result is pass, fail or skipped (a step not asked for, or not run
	// because an earlier one failed).
	Result   string        `json:"result"`
	Duration time.Duration `json:"durationNs"`
	Detail   string        `json:"detail"`
}

// Step results.
const (
	Pass    = "pass"
	Fail    = "fail"
	Skipped = "skipped"
)

// Canary runs rounds against one pool of a runtime.
type Canary struct {
	client *runtimeapi.Client
	pool   string
	o      options
}

type options struct {
	approved, denied string // host:port
	lines            int
	roundTimeout     time.Duration
	history          *History
	metrics          *telemetry.CanaryMetrics
	log              *slog.Logger
	now              func() time.Time
}

// Option configures New.
type Option func(*options) error

// WithApproved is a destination the pool's policy allows: each round
// reaches it from the sandbox through its egress proxy and fails when it
// cannot. dest is a URL (http://host:port/..., https://host/...) or
// host:port. Without it the step is skipped.
func WithApproved(dest string) Option {
	return func(o *options) (err error) {
		o.approved, err = hostPort("approved", dest)
		return err
	}
}

// WithDenied is a destination the pool's policy denies: each round tries
// it from the sandbox, directly and through its egress proxy, and fails
// when either gets through. Without it the step is skipped.
func WithDenied(dest string) Option {
	return func(o *options) (err error) {
		o.denied, err = hostPort("denied", dest)
		return err
	}
}

// WithLines is how many numbered lines the output step streams (1000 when
// not given; 1 to 100000).
func WithLines(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 100000 {
			return fmt.Errorf("%w: lines %d: want 1 to 100000", ErrInvalid, n)
		}
		o.lines = n
		return nil
	}
}

// WithRoundTimeout bounds a round (2 minutes when not given); the release
// of its claim gets 30 seconds more.
func WithRoundTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: round timeout %s: want more than 0", ErrInvalid, d)
		}
		o.roundTimeout = d
		return nil
	}
}

// WithHistory appends each round to h.
func WithHistory(h *History) Option {
	return func(o *options) error { o.history = h; return nil }
}

// WithMetrics records each round in m.
func WithMetrics(m *telemetry.CanaryMetrics) Option {
	return func(o *options) error { o.metrics = m; return nil }
}

// WithLogger logs each round's end on l: INFO when it passed, ERROR (the
// alert, naming pool and step) when it failed. Default: nothing logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// New makes a canary of pool on the runtime client speaks to.
func New(client *runtimeapi.Client, pool string, opts ...Option) (*Canary, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: no runtime client", ErrInvalid)
	}
	if pool == "" || telemetry.Bound(pool) != pool {
		return nil, fmt.Errorf("%w: pool %q: want a pool's name", ErrInvalid, pool)
	}
	o := options{lines: 1000, roundTimeout: 2 * time.Minute, now: time.Now,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.approved != "" && o.approved == o.denied {
		return nil, fmt.Errorf("%w: %s is both the approved and the denied destination", ErrInvalid, o.approved)
	}
	return &Canary{client: client, pool: pool, o: o}, nil
}

// hostPort reads a destination: a URL (its host and port, 80 or 443 by
// scheme when it names none) or host:port.
func hostPort(which, dest string) (string, error) {
	if dest == "" {
		return "", nil
	}
	u, err := url.Parse(dest)
	if err == nil && u.Scheme != "" && u.Host != "" {
		port := u.Port()
		switch {
		case port != "":
		case u.Scheme == "http":
			port = "80"
		case u.Scheme == "https":
			port = "443"
		default:
			return "", fmt.Errorf("%w: %s destination %q: scheme %q names no port: give one", ErrInvalid, which, dest, u.Scheme)
		}
		return joinHostPort(u.Hostname(), port), nil
	}
	if h, p, ok := splitHostPort(dest); ok {
		return joinHostPort(h, p), nil
	}
	return "", fmt.Errorf("%w: %s destination %q: want a URL (http://host:port/) or host:port", ErrInvalid, which, dest)
}

// Run runs a round now and then every interval until ctx ends. Rounds
// never overlap: a round longer than the interval delays the next.
func (c *Canary) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("%w: interval %s: want more than 0", ErrInvalid, interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = c.Round(ctx) // failures are logged, recorded and counted
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round runs one round, records it (history, metrics, log) and returns
// it. The error is only about recording it: a round that failed is a
// Round with Passed false.
//
// A round that failed because ctx ended (the canary stopping) is neither
// recorded nor an alert: it returns with ErrInterrupted, its claim
// released.
func (c *Canary) Round(ctx context.Context) (*Round, error) {
	r := c.round(ctx)
	if !r.Passed && ctx.Err() != nil {
		c.o.log.Warn("canary round interrupted", "pool", c.pool, "run_id", r.RunID, "step", r.FailedStep)
		return r, fmt.Errorf("%w: %v", ErrInterrupted, context.Cause(ctx))
	}
	var err error
	if c.o.history != nil {
		if err = c.o.history.Append(r); err != nil {
			c.o.log.Error("canary history not written", "pool", c.pool, "run_id", r.RunID, "error", err.Error())
		}
	}
	if c.o.metrics != nil {
		steps := make([]telemetry.CanaryStepTime, 0, len(r.Steps))
		for _, s := range r.Steps {
			if s.Result != Skipped {
				steps = append(steps, telemetry.CanaryStepTime{Step: s.Step, Duration: s.Duration})
			}
		}
		c.o.metrics.Round(context.WithoutCancel(ctx), c.pool, steps, r.FailedStep, r.Finished)
	}
	if r.Passed {
		c.o.log.Info("canary round passed", "pool", c.pool, "run_id", r.RunID, "sandbox_id", r.SandboxID,
			"generation", r.Generation, "duration_ms", r.Finished.Sub(r.Started).Milliseconds())
	} else {
		c.o.log.Error("canary round failed", "pool", c.pool, "step", r.FailedStep, "reason", r.Reason,
			"run_id", r.RunID, "sandbox_id", r.SandboxID, "generation", r.Generation)
	}
	return r, err
}

// round runs the steps: a step that fails skips the ones after it but the
// release, which runs whenever a claim was granted.
func (c *Canary) round(ctx context.Context) *Round {
	r := &Round{Pool: c.pool, Started: c.o.now().UTC(), Steps: []StepResult{}}
	rctx, cancel := context.WithTimeout(ctx, c.o.roundTimeout)
	defer cancel()
	cl := &claimRun{c: c, r: r}
	for _, step := range Steps {
		if step == StepRelease {
			break
		}
		switch {
		case r.FailedStep != "":
			c.skip(r, step, "not run: step "+r.FailedStep+" failed")
			continue
		case step == StepApproved && c.o.approved == "":
			c.skip(r, step, "no approved destination given")
			continue
		case step == StepDenied && c.o.denied == "":
			c.skip(r, step, "no denied destination given")
			continue
		}
		c.run(r, step, func() (string, error) { return cl.do(rctx, step) })
	}
	// The claim is released even when the round ran out of time, and so
	// is one a claim request that got no answer may have made.
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer relCancel()
	switch {
	case cl.grant != nil:
		c.run(r, StepRelease, func() (string, error) { return cl.release(relCtx) })
	case cl.unknown:
		c.run(r, StepRelease, func() (string, error) { return cl.releaseUnknown(relCtx) })
	default:
		c.skip(r, StepRelease, "not run: no claim was granted")
	}
	r.Finished = c.o.now().UTC()
	r.Passed = r.FailedStep == ""
	return r
}

func (c *Canary) skip(r *Round, step, why string) {
	r.Steps = append(r.Steps, StepResult{Step: step, Result: Skipped, Detail: why})
}

// run times one step and records its result; the first failure is the
// round's.
func (c *Canary) run(r *Round, step string, f func() (string, error)) {
	start := c.o.now()
	detail, err := f()
	res := StepResult{Step: step, Result: Pass, Duration: c.o.now().Sub(start), Detail: detail}
	var skip skipped
	if errors.As(err, &skip) {
		res.Result, res.Detail = Skipped, string(skip)
		r.Steps = append(r.Steps, res)
		return
	}
	if err != nil {
		res.Result, res.Detail = Fail, err.Error()
		if r.FailedStep == "" {
			r.FailedStep, r.Reason = step, err.Error()
		}
	}
	r.Steps = append(r.Steps, res)
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
