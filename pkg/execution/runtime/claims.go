package runtime

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// Errors of claims.
var (
	// ErrStale: the runtime's view of the config repository is older than
	// its maximum staleness; claims wait for a fresh one (HTTP 503).
	ErrStale = errors.New("runtime: the view of the config repository is stale")
	// ErrFenced: a request carried a fencing token of an earlier allocation
	// attempt (or none that matches), or its attempt ended while it ran; it
	// is refused. Grant says what the claim's current attempt is.
	ErrFenced = errors.New("runtime: fenced: the token is not the claim's current one")
	// ErrNoClaim: no claim with this run id is open.
	ErrNoClaim = errors.New("runtime: no such claim")
	// ErrClosed: the Runtime was closed; it grants no more claims.
	ErrClosed = errors.New("runtime: closed")
)

// Named defaults of claims.
const (
	// DefaultHeartbeatInterval is how often the runtime pings the runner of
	// every open claim; a ping unanswered within the interval is missed.
	DefaultHeartbeatInterval = time.Second
	// DefaultHeartbeatMisses is how many heartbeats in a row a runner may
	// miss before its claim moves to a new sandbox.
	DefaultHeartbeatMisses = 3
	// DefaultReadyFreshness: a warm member whose runner answered within
	// the last second is handed to a claim without a ping of its own.
	DefaultReadyFreshness = time.Second
	// maxClaimAttempts bounds the sandboxes one Claim tries when they are
	// not ready in time (the claim's deadline bounds them too).
	maxClaimAttempts = 5
	// defaultReadyTimeout applies when a pool sets no readyTimeout.
	defaultReadyTimeout = 30 * time.Second
)

// Runtime grants claims on warm pools, fences their allocation attempts,
// watches their runners' heartbeats, issues their credentials, and
// records a run manifest for every claim.
//
// A Runtime runs one heartbeat monitor per open claim from the moment it
// is granted until it is released; Close stops them all.
type Runtime struct {
	desired      func() (*Desired, time.Time)
	warm         *Warm
	store        runs.Store
	maxStaleness time.Duration
	node         string
	now          func() time.Time
	o            runtimeOptions
	logMu        sync.Mutex

	mu     sync.Mutex
	claims map[string]*claim
	keys   map[string]*keyed // by request key
	proofs map[string]bool   // owners of the proof claims under way
	closed bool
	stop   chan struct{} // closed by Close

	draining atomic.Bool // Drain was called: no new claims (stopping.go)
	wg       sync.WaitGroup

	egress egressLog // attempts of sandboxes' egress proxies (egress.go)
}

// WithIdentity is the identity the runtime records as served_by.runtime in
// each run manifest (default: runmanifest.Self(), this process as it
// measures itself).
func WithIdentity(p runmanifest.Process) RuntimeOption {
	return func(o *runtimeOptions) { o.self = &p }
}

// RuntimeOption configures NewRuntime. Options cannot fail: a value out of
// range keeps the default, as each option says.
type RuntimeOption func(*runtimeOptions)

type runtimeOptions struct {
	self      *runmanifest.Process
	every     time.Duration
	misses    int
	freshness time.Duration
	broker    *Broker
	log       io.Writer
	noRenew   bool
	address   string // where other replicas reach this one (forward.go); "" for none
	// checkpoints is where runs are checkpointed (checkpoint.go); nil: not.
	checkpoints *Checkpoints
	tracing     *telemetry.Tracing
	logger      *slog.Logger
}

// WithCredentialRenewal turns the renewal of open claims' credentials
// (at RenewAt of their lifetime; the default) on or off. Off, a run that
// outlives its credential holds an expired one: providers refuse it with
// ErrCredentialExpired.
func WithCredentialRenewal(on bool) RuntimeOption {
	return func(o *runtimeOptions) { o.noRenew = !on }
}

// WithHeartbeat sets how often the runtime pings each open claim's runner
// (every; a ping unanswered within that long is missed) and after how many
// missed pings in a row the claim moves (misses). Zero or negative values
// keep DefaultHeartbeatInterval and DefaultHeartbeatMisses.
func WithHeartbeat(every time.Duration, misses int) RuntimeOption {
	return func(o *runtimeOptions) {
		if every > 0 {
			o.every = every
		}
		if misses > 0 {
			o.misses = misses
		}
	}
}

// WithReadyFreshness sets how recently a warm member's runner must have
// answered (Reconcile pings warm members every 500 ms) for a claim to take
// it without pinging it again: d > 0 sets it, d < 0 makes every claim ping,
// 0 keeps DefaultReadyFreshness.
func WithReadyFreshness(d time.Duration) RuntimeOption {
	return func(o *runtimeOptions) {
		switch {
		case d > 0:
			o.freshness = d
		case d < 0:
			o.freshness = 0
		}
	}
}

// WithBroker issues the claims' credentials from b; nil keeps the default,
// a broker of the runtime's own (LocalIssuer, DefaultCredentialTTL).
func WithBroker(b *Broker) RuntimeOption {
	return func(o *runtimeOptions) {
		if b != nil {
			o.broker = b
		}
	}
}

// WithLog sends one line per move (and per failed move) to w; nil keeps
// the default, none. Lines name runs, sandboxes and attempts, never a token
// or a credential.
func WithLog(w io.Writer) RuntimeOption {
	return func(o *runtimeOptions) {
		if w != nil {
			o.log = w
		}
	}
}

// claim is one open claim. Two locks: op orders the transitions of the
// claim (Move, Release, Grant wait for one another), mu guards the fields
// for short reads and writes and is never held across I/O, so that a long
// Exec blocks neither heartbeats nor a move that fences it out.
type claim struct {
	runID, pool   string
	tenant        string
	sessionID     string
	requestKey    string // "" when the request carried none
	gen           *generation.Generation
	secretVersion string // the generation's pinned secret version; "" when none

	op sync.Mutex

	mu         sync.Mutex
	sandbox    *sandbox.Sandbox // nil between a move's kill and its new sandbox
	attempt    int
	token      string
	tokenSum   string // SHA-256 of the token, for a run adopted suspended (suspended.go) whose token is not known; "" otherwise
	warm       bool
	credential string        // fingerprint of the attempt's credential; "" when none
	renewDue   time.Time     // when that credential is renewed (renew.go)
	fence      chan struct{} // closed when the attempt ends (moved or released)
	released   bool
	first      bool              // runner awakened recorded
	output     atomic.Bool       // first_output recorded
	payload    atomic.Bool       // payload_fetched recorded
	done       chan struct{}     // closed once released: the heartbeat stops
	granted    time.Time         // when the claim was granted (tracing.go: runner awake)
	span       trace.SpanContext // the runtime claim span

	// Checkpoints (checkpoint.go): the run's last checkpoint, the Base
	// that makes the next one incremental (nil: the next is whole), and
	// whether the run is suspended (no sandbox, not moved by heartbeats).
	checkpointID string
	ckBase       *checkpoint.Base
	suspended    bool
}

// NewRuntime grants claims from the desired state desired returns (with
// when it was last confirmed current; a Syncer's Current), on warm, with
// manifests in store. maxStaleness bounds how old that view may be. Close
// stops its heartbeat monitors.
func NewRuntime(desired func() (*Desired, time.Time), warm *Warm, store runs.Store, maxStaleness time.Duration, opts ...RuntimeOption) *Runtime {
	o := runtimeOptions{every: DefaultHeartbeatInterval, misses: DefaultHeartbeatMisses, freshness: DefaultReadyFreshness, log: io.Discard}
	for _, opt := range opts {
		opt(&o)
	}
	if o.self == nil {
		p, err := runmanifest.Self()
		if err != nil {
			fmt.Fprintf(o.log, "runtime: identity: %v\n", err)
		}
		o.self = &p
	}
	if o.address != "" {
		p := *o.self
		p.Address = o.address
		o.self = &p
	}
	if o.broker == nil {
		o.broker, _ = NewBroker(LocalIssuer, DefaultCredentialTTL) // valid arguments: no error
	}
	node, _ := os.Hostname()
	return &Runtime{
		desired: desired, warm: warm, store: store, maxStaleness: maxStaleness, node: node, now: time.Now, o: o,
		claims: map[string]*claim{}, keys: map[string]*keyed{}, proofs: map[string]bool{}, stop: make(chan struct{}),
	}
}

// Close stops the heartbeat monitors (a move under way is canceled) and
// waits for them. Open claims stay open and their sandboxes keep running;
// a closed Runtime grants no new claims (ErrClosed). Close is repeat-safe.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.stop)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// ClaimRequest asks for a sandbox of a pool.
type ClaimRequest struct {
	Pool      string
	Tenant    string
	SessionID string
	// Deadline bounds the allocation (zero: the context's).
	Deadline time.Time
	// RequestKey makes the claim idempotent (see Claim); "" for none. It is
	// 1 to 128 characters of [A-Za-z0-9._:-].
	RequestKey string
	// ControlPlane is the control plane that sent the claim, as it reported
	// itself (nil: none, a claim made straight to the runtime).
	ControlPlane *runmanifest.Process
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Claim allocates a sandbox of the pool's active generation (a warm member,
// or a cold start), records the run manifest, and returns the grant once
// the sandbox's runner has answered a ping within the pool's readyTimeout.
// A sandbox that does not is killed and the claim moved to a cold start
// (the allocation attempt goes up, the manifest says so), as long as the
// claim's deadline allows. When the generation pins a secretVersion, the
// broker's token for this claim is placed in the sandbox. The claim's
// heartbeat monitor starts with the grant.
//
// A request with a RequestKey is idempotent: while the claim it made is
// open, the same key answers that claim's current grant again (Adopted),
// and concurrent requests with one key make one claim. A key whose claim
// has ended is refused (ErrRequestKeyUsed): a claimant that crashed learns
// that its work must not run again. The key is recorded in the run
// manifest (request_key).
func (r *Runtime) Claim(ctx context.Context, req ClaimRequest) (*runtimeapi.Grant, error) {
	if r.Draining() && req.RequestKey == "" {
		return nil, ErrDraining
	}
	if req.RequestKey != "" {
		return r.claimKeyed(ctx, req)
	}
	c, err := r.newClaim(ctx, req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grant(), nil
}

// newClaim is Claim without its request key's bookkeeping: it always
// makes a new claim, in a runtime claim span.
func (r *Runtime) newClaim(ctx context.Context, req ClaimRequest) (*claim, error) {
	received := r.now()
	ctx, span := r.tracer().Start(ctx, "runtime claim", trace.WithTimestamp(received),
		trace.WithAttributes(attribute.String("pool", req.Pool), attribute.String("session_id", req.SessionID)))
	c, err := r.allocate(ctx, req, received)
	if err != nil {
		endSpan(span, err)
		return nil, err
	}
	c.mu.Lock()
	c.granted, c.span = r.now(), span.SpanContext()
	warm := c.warm
	c.mu.Unlock()
	endSpan(span, nil, append(c.ids(), attribute.Bool("warm", warm))...)
	r.runLog(ctx, slog.LevelInfo, c, "claim granted", nil, "warm", warm, "seconds", c.granted.Sub(received).Seconds())
	return c, nil
}

// allocate is newClaim in its span: sandbox ready and credential issue
// are its children.
func (r *Runtime) allocate(ctx context.Context, req ClaimRequest, received time.Time) (*claim, error) {
	if r.isClosed() {
		return nil, ErrClosed
	}
	d, at := r.desired()
	if err := r.stale(d, at); err != nil {
		return nil, err
	}
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	p, ok := d.Pools[req.Pool]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoPool, req.Pool)
	}
	g, ok := p.Active()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoActive, req.Pool)
	}
	accepted := r.now()
	runID := "r-" + newToken()[:20]
	readyTimeout := p.Pool.Spec.ReadyTimeout.Duration
	if readyTimeout <= 0 {
		readyTimeout = defaultReadyTimeout
	}
	_, readySpan := r.tracer().Start(ctx, "sandbox ready", trace.WithAttributes(attribute.String("run_id", runID), attribute.String("pool", req.Pool),
		attribute.String("session_id", req.SessionID)))
	s, warm, granted, err := r.warm.claim(ctx, d, req.Pool, runID)
	defer granted() // cold starts yield to a warm hit until it returns
	if err != nil {
		endSpan(readySpan, err)
		return nil, err
	}
	// The ready check runs beside the credential and the manifest: a warm
	// hit waits for the slower of them, not for both.
	// A warm member whose runner answered within the ready freshness
	// (Reconcile pings them) is not pinged again: the heartbeat monitor
	// takes over from the grant on.
	ready := make(chan error, 1)
	switch {
	case r.warm.cluster != nil: // Create returned once its runner proved its identity, just now
		ready <- nil
	case warm && r.o.freshness > 0 && r.warm.answered(s.ID, r.o.freshness):
		ready <- nil
	default:
		go func() { ready <- ping(ctx, s, readyTimeout) }()
	}
	bg := context.WithoutCancel(ctx)
	c := &claim{
		runID: runID, pool: req.Pool, tenant: req.Tenant, sessionID: req.SessionID, requestKey: req.RequestKey, gen: g, secretVersion: secretVersion(g),
		sandbox: s, attempt: 1, token: newToken(), warm: warm,
		fence: make(chan struct{}), done: make(chan struct{}),
	}
	assigned := r.now()
	m := manifestOf(g, d, s)
	m.RunID, m.SessionID, m.Tenant, m.Pool, m.Warm = runID, req.SessionID, req.Tenant, req.Pool, warm
	m.RequestKey = req.RequestKey
	m.AllocationAttempt, m.SandboxID, m.NodeID, m.Cluster, m.Namespace = 1, s.ID, r.node, "local", req.Pool
	placeManifest(m, s)
	m.ServedBy = runmanifest.ServedBy{ControlPlane: req.ControlPlane, Runtime: r.o.self}
	if s.RunnerBinarySHA256 != "" {
		m.ServedBy.Runner = &runmanifest.Process{BinarySHA256: s.RunnerBinarySHA256}
	}
	m.Limits = r.manifestLimits(ctx, d, req.Pool, s)
	m.Status = runmanifest.StatusGranted
	m.Lifecycle = runmanifest.Lifecycle{RequestReceived: received, AdmissionAccepted: accepted, ClaimCreated: assigned, SandboxAssigned: assigned, Ready: s.Ready}
	if c.secretVersion != "" {
		_, is := r.tracer().Start(ctx, "credential issue", trace.WithAttributes(c.ids()...))
		rc, err := r.issue(ctx, runID, c.secretVersion, s)
		endSpan(is, err, attribute.String("secret_version", c.secretVersion))
		if err != nil {
			endSpan(readySpan, err)
			_ = r.warm.Release(bg, s.ID)
			return nil, err
		}
		c.credential, c.renewDue = rc.SHA256Fingerprint, renewDue(rc)
		m.CredentialIssuances = []runmanifest.Receipt{rc}
		m.Lifecycle.CredentialReady = r.now() // issued and placed in the sandbox's credential tmpfs
	}
	if err := r.store.Create(ctx, m); err != nil {
		endSpan(readySpan, err)
		r.revoke(bg, s, c.credential)
		_ = r.warm.Release(bg, s.ID)
		return nil, err
	}
	err = r.untilReady(ctx, c, <-ready, readyTimeout)
	endSpan(readySpan, err, append(c.ids(), attribute.Bool("warm", warm))...)
	if err != nil {
		r.abandon(bg, c)
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.abandon(bg, c)
		return nil, ErrClosed
	}
	r.claims[runID] = c
	r.wg.Add(1)
	go r.heartbeat(c)
	r.mu.Unlock()
	return c, nil
}

// Holds reports whether owner is a claim this Runtime holds open, or a
// proof claim under way: a lease that lives in this process (a proof claim
// has no run manifest).
func (r *Runtime) Holds(owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claims[owner] != nil || r.proofs[owner]
}

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// grant is the claim's current grant; c.mu must be held.
func (c *claim) grant() *runtimeapi.Grant {
	id := ""
	if c.sandbox != nil {
		id = c.sandbox.ID
	}
	return &runtimeapi.Grant{RunID: c.runID, SandboxID: id, Generation: c.gen.ID, Warm: c.warm, AllocationAttempt: c.attempt, Token: c.token,
		RequestKey: c.requestKey}
}

// check says whether token is the claim's current one; c.mu must be held.
func (c *claim) check(token string) error {
	if c.released {
		return fmt.Errorf("%w: %s", ErrNoClaim, c.runID)
	}
	ok := subtle.ConstantTimeCompare([]byte(c.token), []byte(token)) == 1
	if c.token == "" {
		ok = c.tokenSum != "" && sameToken(c.tokenSum, token)
	}
	if !ok {
		return fmt.Errorf("%w (run %s, attempt %d)", ErrFenced, c.runID, c.attempt)
	}
	return nil
}

// tokenSHA256 is the hex SHA-256 of the claim's current token; c.mu must
// be held.
func (c *claim) tokenSHA256() string {
	if c.token == "" {
		return c.tokenSum
	}
	return tokenSum(c.token)
}

// placeManifest records in m where sandbox s runs, when its backend says
// (s.Placement): cluster, namespace, node, node image, runtime class and
// launch type from the backend's objects, in place of this host.
func placeManifest(m *runmanifest.Manifest, s *sandbox.Sandbox) {
	pl := s.Placement
	if pl == nil {
		return
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&m.Cluster, pl.Cluster)
	set(&m.Namespace, pl.Namespace)
	set(&m.NodeID, pl.NodeID)
	set(&m.NodeImageID, pl.NodeImageID)
	set(&m.RuntimeClass, pl.RuntimeClass)
	m.LaunchType = pl.LaunchType
}

// manifestOf fills the artifact fields of a run manifest from g, served
// from desired state d, and the runner binary of sandbox s. The policy
// revision is g's policy pin when it has one, else the revision of the
// verification policy d was verified against (always recorded as
// verification_policy_revision).
func manifestOf(g *generation.Generation, d *Desired, s *sandbox.Sandbox) *runmanifest.Manifest {
	id := func(k generation.Kind) string {
		if p, ok := g.Pins[k]; ok {
			return p.Identity()
		}
		return ""
	}
	m := &runmanifest.Manifest{
		Generation:                 g.ID,
		ConfigRevision:             d.Revision,
		ControlPlaneDigest:         id(generation.ControlPlane),
		RunnerImageDigest:          id(generation.Runner),
		RunnerBinarySHA256:         s.RunnerBinarySHA256,
		WorkspaceTemplateID:        id(generation.WorkspaceTemplate),
		NodeImageID:                id(generation.NodeImage),
		RuntimeClass:               id(generation.RuntimeClass),
		PolicyRevision:             id(generation.Policy),
		VerificationPolicyRevision: d.PolicyRevision,
		ModelID:                    id(generation.Model),
		PromptBundleID:             id(generation.PromptBundle),
		SecretVersion:              secretVersion(g),
	}
	if m.PolicyRevision == "" {
		m.PolicyRevision = m.VerificationPolicyRevision
	}
	return m
}

// lookup returns the open claim runID.
func (r *Runtime) lookup(runID string) (*claim, error) {
	r.mu.Lock()
	c := r.claims[runID]
	r.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	}
	return c, nil
}

// Exec runs a command in the claim's sandbox; token must be the current
// attempt's. The claim is not locked while the command runs: when the
// claim moves (or is released) meanwhile, the command is canceled and its
// result refused with ErrFenced.
func (r *Runtime) Exec(ctx context.Context, runID, token string, req runner.ExecRequest, stdout, stderr io.Writer) (st *runner.ExitStatus, err error) {
	var sid trace.SpanID
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if err := c.check(token); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if c.suspended {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: run %s: resume it first", ErrSuspended, runID)
	}
	s, fence, attempt, first := c.sandbox, c.fence, c.attempt, !c.first
	c.first = true
	c.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w: run %s has no sandbox", sandbox.ErrNotRunning, runID)
	}
	ctx, span := r.tracer().Start(ctx, "runtime command", trace.WithAttributes(c.ids()...))
	req.TraceParent, sid = childTraceParent(ctx)
	spanCtx := ctx
	defer func() {
		r.runnerSpans(spanCtx, c, sid, st, first)
		if st != nil {
			span.SetAttributes(attribute.Int("exit_code", st.ExitCode))
			r.runLog(spanCtx, slog.LevelInfo, c, "command ended", nil, "exit_code", st.ExitCode, "duration_ms", st.DurationMs, "timed_out", st.TimedOut, "outcome", st.Outcome)
		} else if err != nil {
			r.runLog(spanCtx, slog.LevelWarn, c, "command failed", nil, "err", err)
		}
		endSpan(span, err)
	}()
	if first {
		now := r.now()
		_ = r.store.Update(ctx, runID, func(m *runmanifest.Manifest) error {
			m.Status, m.Lifecycle.RunnerAwakened = runmanifest.StatusRunning, now
			return nil
		})
	}
	// the stamps the command sets: first output, and the runner's and the
	// workload's events (payload fetched, model request started, first
	// useful output)
	stdout, stderr = &stamper{w: stdout, r: r, c: c}, &stamper{w: stderr, r: r, c: c}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-fence:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, err = r.execBounded(ctx, runID, s, req, stdout, stderr)
	r.flushEgress(context.WithoutCancel(ctx), runID, s.ID)
	select {
	case <-fence:
		return nil, fmt.Errorf("%w: run %s attempt %d ended while the command ran", ErrFenced, runID, attempt)
	default:
	}
	return st, err
}

// Release ends the claim: its credential is revoked, the sandbox deleted
// (never returned to the pool) and the manifest completed with its exit
// code. A command still running on the claim is canceled.
func (r *Runtime) Release(ctx context.Context, runID, token string, exitCode *int) error {
	return r.ReleaseAfter(ctx, runID, token, exitCode, nil)
}

// ReleaseAfter is Release with the time the control plane's post-run step
// was done (nil: not said), which the manifest records as
// post_hook_complete.
func (r *Runtime) ReleaseAfter(ctx context.Context, runID, token string, exitCode *int, postHook *time.Time) error {
	c, err := r.lookup(runID)
	if err != nil {
		return err
	}
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	if err := c.check(token); err != nil {
		c.mu.Unlock()
		return err
	}
	s, credential := c.sandbox, c.credential
	c.released = true
	close(c.fence)
	c.mu.Unlock()
	ctx, span := r.tracer().Start(ctx, "runtime release", trace.WithAttributes(c.ids()...))
	err = r.release(ctx, c, s, credential, exitCode, postHook)
	endSpan(span, err)
	if err != nil {
		r.runLog(ctx, slog.LevelWarn, c, "release failed", nil, "err", err)
	} else {
		r.runLog(ctx, slog.LevelInfo, c, "claim released", nil)
	}
	if err != nil {
		// The claim stays open (same attempt and token): Release may be
		// tried again.
		c.mu.Lock()
		c.released = false
		c.fence = make(chan struct{})
		c.mu.Unlock()
		return err
	}
	close(c.done)
	r.dropStaging(runID)
	r.mu.Lock()
	delete(r.claims, runID)
	r.forgetKey(c)
	r.mu.Unlock()
	if err := r.dropSuspended(runID); err != nil {
		r.logf("%v", err) // a restart finds the run ended and drops the record then
	}
	return nil
}

func (r *Runtime) release(ctx context.Context, c *claim, s *sandbox.Sandbox, credential string, exitCode *int, postHook *time.Time) error {
	published := r.now()
	revoked := r.revoke(ctx, s, credential)
	if s != nil {
		if err := r.warm.Release(ctx, s.ID); err != nil {
			return err
		}
	}
	released := r.now()
	return r.finalUpdate(ctx, c.runID, s, func(m *runmanifest.Manifest) {
		// without a confirmed exit code a run that ran ends unknown, never
		// completed, and no result was published
		m.Status, m.ExitCode = runmanifest.EndStatus(m, exitCode), exitCode
		if exitCode != nil {
			m.Lifecycle.ResultPublished = published
		}
		m.Lifecycle.ResourcesReleased = released
		if postHook != nil {
			m.Lifecycle.PostHookComplete = postHook.UTC()
		}
		markRevoked(m, credential, revoked)
	})
}

// finalUpdate finalises run runID's manifest with fn and the egress
// attempts its sandbox s (deleted by now, so every attempt is in) made
// since the last command.
func (r *Runtime) finalUpdate(ctx context.Context, runID string, s *sandbox.Sandbox, fn func(*runmanifest.Manifest)) error {
	var (
		as      []runmanifest.EgressAttempt
		dropped int
	)
	if s != nil {
		as, dropped = r.takeEgress(s.ID)
	}
	var denied int
	var rev string
	err := r.store.Update(ctx, runID, func(m *runmanifest.Manifest) error {
		fn(m)
		denied, rev = addEgress(m, as, dropped), m.PolicyRevision
		return nil
	})
	if err == nil {
		r.countDenials(rev, denied)
	}
	return err
}
