package runtime

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/runs"
	"github.com/slipway-dev/slipway/pkg/sandbox"
	"github.com/slipway-dev/slipway/pkg/sandbox/runner"
)

// Errors of claims.
var (
	// ErrStale: the runtime's view of the config repository is older than
	// its maximum staleness; claims wait for a fresh one (HTTP 503).
	ErrStale = errors.New("runtime: the view of the config repository is stale")
	// ErrFenced: a request carried a fencing token of an earlier allocation
	// attempt (or none that matches); it is refused.
	ErrFenced = errors.New("runtime: fenced: the token is not the claim's current one")
	// ErrNoClaim: no claim with this run id is open.
	ErrNoClaim = errors.New("runtime: no such claim")
)

// Runtime grants claims on warm pools, fences their allocation attempts,
// and records a run manifest for every claim.
type Runtime struct {
	desired      func() (*Desired, time.Time)
	warm         *Warm
	store        runs.Store
	maxStaleness time.Duration
	node         string
	now          func() time.Time

	mu     sync.Mutex
	claims map[string]*claim
}

type claim struct {
	mu      sync.Mutex // one request at a time per claim
	runID   string
	pool    string
	gen     *generation.Generation
	sandbox *sandbox.Sandbox
	attempt int
	token   string
	first   bool // first output recorded
}

// NewRuntime grants claims from the desired state desired returns (with
// when it was last confirmed current; a Syncer's Current), on warm, with
// manifests in store. maxStaleness bounds how old that view may be.
func NewRuntime(desired func() (*Desired, time.Time), warm *Warm, store runs.Store, maxStaleness time.Duration) *Runtime {
	node, _ := os.Hostname()
	return &Runtime{desired: desired, warm: warm, store: store, maxStaleness: maxStaleness, node: node, now: time.Now, claims: map[string]*claim{}}
}

// ClaimRequest asks for a sandbox of a pool.
type ClaimRequest struct {
	Pool      string
	Tenant    string
	SessionID string
	// Deadline bounds the allocation (zero: the context's).
	Deadline time.Time
}

// Grant is a claim's current allocation.
type Grant struct {
	RunID             string `json:"runId"`
	SandboxID         string `json:"sandboxId"`
	Generation        string `json:"generation"`
	Warm              bool   `json:"warm"`
	AllocationAttempt int    `json:"allocationAttempt"`
	// Token fences this attempt: requests must carry it.
	Token string `json:"token"`
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Claim allocates a sandbox of the pool's active generation (a warm member,
// or a cold start), records the run manifest, and returns the grant.
func (r *Runtime) Claim(ctx context.Context, req ClaimRequest) (*Grant, error) {
	received := r.now()
	d, at := r.desired()
	if d == nil || r.now().Sub(at) > r.maxStaleness {
		return nil, ErrStale
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
	s, warm, err := r.warm.Claim(ctx, d, req.Pool, runID)
	if err != nil {
		return nil, err
	}
	c := &claim{runID: runID, pool: req.Pool, gen: g, sandbox: s, attempt: 1, token: newToken()}
	assigned := r.now()
	m := manifestOf(g, d.Revision)
	m.RunID, m.SessionID, m.Tenant, m.Pool, m.Warm = runID, req.SessionID, req.Tenant, req.Pool, warm
	m.AllocationAttempt, m.SandboxID, m.NodeID, m.Cluster, m.Namespace = 1, s.ID, r.node, "local", req.Pool
	m.Status = runs.StatusGranted
	m.Lifecycle = runs.Lifecycle{RequestReceived: received, AdmissionAccepted: accepted, ClaimCreated: assigned, SandboxAssigned: assigned, Ready: s.Ready}
	if err := r.store.Create(ctx, m); err != nil {
		_ = r.warm.Release(context.WithoutCancel(ctx), s.ID)
		return nil, err
	}
	r.mu.Lock()
	r.claims[runID] = c
	r.mu.Unlock()
	return c.grant(warm), nil
}

func (c *claim) grant(warm bool) *Grant {
	return &Grant{RunID: c.runID, SandboxID: c.sandbox.ID, Generation: c.gen.ID, Warm: warm, AllocationAttempt: c.attempt, Token: c.token}
}

// manifestOf fills the artifact fields of a run manifest from g.
func manifestOf(g *generation.Generation, revision string) *runs.Manifest {
	id := func(k generation.Kind) string {
		if p, ok := g.Pins[k]; ok {
			return p.Identity()
		}
		return ""
	}
	return &runs.Manifest{
		Generation: g.ID, ConfigRevision: revision,
		ControlPlaneDigest: id(generation.ControlPlane), RunnerDigest: id(generation.Runner),
		WorkspaceTemplateID: id(generation.WorkspaceTemplate), NodeImageID: id(generation.NodeImage),
		RuntimeClass: id(generation.RuntimeClass), PolicyRevision: id(generation.Policy),
		ModelID: id(generation.Model), PromptBundleID: id(generation.PromptBundle),
	}
}

// get returns the open claim runID if token is its current one.
func (r *Runtime) get(runID, token string) (*claim, error) {
	r.mu.Lock()
	c := r.claims[runID]
	r.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	}
	c.mu.Lock()
	if subtle.ConstantTimeCompare([]byte(c.token), []byte(token)) != 1 {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w (run %s, attempt %d)", ErrFenced, runID, c.attempt)
	}
	return c, nil // locked: the caller unlocks
}

// Exec runs a command in the claim's sandbox; token must be the current
// attempt's.
func (r *Runtime) Exec(ctx context.Context, runID, token string, req runner.ExecRequest, stdout, stderr io.Writer) (*runner.ExitStatus, error) {
	c, err := r.get(runID, token)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if !c.first {
		c.first = true
		now := r.now()
		_ = r.store.Update(ctx, runID, func(m *runs.Manifest) error {
			m.Status, m.Lifecycle.RunnerAwakened, m.Lifecycle.FirstOutput = runs.StatusRunning, now, now
			return nil
		})
	}
	return c.sandbox.Exec(ctx, req, stdout, stderr)
}

// Move gives the claim a new sandbox (its sandbox was not ready in time, or
// its runner missed heartbeats): the allocation attempt goes up, a new
// token fences out every request of the old one, and the old sandbox is
// killed.
func (r *Runtime) Move(ctx context.Context, runID string) (*Grant, error) {
	r.mu.Lock()
	c := r.claims[runID]
	r.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.sandbox
	c.token = newToken() // from here on the old attempt is fenced
	c.attempt++
	s, err := r.warm.create(ctx, c.pool, c.gen, runID)
	if err != nil {
		return nil, err
	}
	_ = r.warm.Release(ctx, old.ID)
	c.sandbox = s
	now := r.now()
	if err := r.store.Update(ctx, runID, func(m *runs.Manifest) error {
		m.AllocationAttempt, m.SandboxID, m.Warm = c.attempt, s.ID, false
		m.Lifecycle.SandboxAssigned, m.Lifecycle.Ready = now, s.Ready
		return nil
	}); err != nil {
		return nil, err
	}
	return c.grant(false), nil
}

// Release ends the claim: the sandbox is deleted (never returned to the
// pool) and the manifest completed with its exit code.
func (r *Runtime) Release(ctx context.Context, runID, token string, exitCode *int) error {
	c, err := r.get(runID, token)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	published := r.now()
	if err := r.warm.Release(ctx, c.sandbox.ID); err != nil {
		return err
	}
	released := r.now()
	status := runs.StatusCompleted
	if exitCode != nil && *exitCode != 0 {
		status = runs.StatusFailed
	}
	if err := r.store.Update(ctx, runID, func(m *runs.Manifest) error {
		m.Status, m.ExitCode = status, exitCode
		m.Lifecycle.ResultPublished, m.Lifecycle.ResourcesReleased = published, released
		return nil
	}); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.claims, runID)
	r.mu.Unlock()
	return nil
}
