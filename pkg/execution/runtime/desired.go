package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/internal/apierror"
	"github.com/slipway-dev/slipway/internal/startup"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// Desired is the config repository's desired state at one revision: every
// pool's settings, state, and the generations it wants warm.
type Desired struct {
	// Revision is the config repository commit this was read from.
	Revision string
	// PolicyRevision is the revision of the verification policy the
	// generations were verified against: Revision when the repository holds
	// policies/verification.yaml (the commit at which it was read: the
	// runtime's clone is shallow, so the last commit that changed the file
	// is not known, and the commit read names the exact bytes), the
	// "sha256:<hex>" digest of the policy given (Verify.Policy) when it
	// holds none, and "" when verification is skipped.
	PolicyRevision string
	// Policy is that verification policy (nil when verification is
	// skipped); PolicySource says where it came from: "repository",
	// "file" (Verify.Policy) or "skipped".
	Policy       *policy.Policy
	PolicySource string
	// Pools by name.
	Pools map[string]*PoolDesired
	// Packages says, for each control-plane, runner and workspace
	// template image of a verified generation (keyed "KIND IDENTITY"),
	// what the package index holds (with Verify.Packages set): how many
	// packages from which SBOM attestation, or why none; then which
	// builders its verified SLSA provenance names, or that it has none.
	Packages map[string]string
}

// PoolDesired is one pool's desired state.
type PoolDesired struct {
	Pool  *pool.Pool
	State *pool.State
	// Generations holds the documents of the generations the state lists
	// as warming, active or draining, verified against the policy.
	Generations map[string]*generation.Generation
	// Refused lists generations the state names that did not verify (or
	// could not be read), with the reason: the runtime never unpacks them.
	Refused map[string]string
}

// Active returns the pool's active generation, if it has one that
// verified.
func (p *PoolDesired) Active() (*generation.Generation, bool) {
	a, ok := p.State.Active()
	if !ok {
		return nil, false
	}
	g, ok := p.Generations[a.ID]
	return g, ok
}

// Warm returns the generations whose warm members the runtime keeps, in
// the state's order: warming and active ones that verified.
func (p *PoolDesired) Warm() []*generation.Generation {
	var out []*generation.Generation
	for _, e := range p.State.Generations {
		if e.State != pool.Warming && e.State != pool.Active {
			continue
		}
		if g, ok := p.Generations[e.ID]; ok {
			out = append(out, g)
		}
	}
	return out
}

// Verify says how the runtime checks generations before it unpacks them:
// with policies/verification.yaml from the config repository (the
// default), with Policy when the repository has none, or not at all with
// the visibly named Skip.
type Verify struct {
	Policy  *policy.Policy
	Skip    bool
	Options []policy.Option
	// Packages, if set, indexes the packages of every verified
	// generation's workspace template (and control-plane and runner
	// images) from its SBOM attestation, and records its builders from its
	// SLSA provenance (each verified with a key the policy trusts for that
	// kind), once per artifact and policy.
	Packages PackageIndex
}

// verifyCache remembers verification results (policy.Cache: keyed by the
// policy's document and key bytes, the kind and the digest), so a poll does
// not verify again what did not change, and the packages indexed.
type verifyCache struct {
	verified *policy.Cache
	packages packages
}

func newVerifyCache(v Verify) *verifyCache {
	return &verifyCache{verified: policy.NewCache(), packages: packages{index: v.Packages, done: map[string]string{}}}
}

// Load reads the desired state from t, the tree of the config repository
// at revision, and verifies the generations it names.
func Load(ctx context.Context, t *gitops.Tree, revision string, v Verify) (*Desired, error) {
	return load(ctx, t, revision, v, newVerifyCache(v))
}

func load(ctx context.Context, t *gitops.Tree, revision string, v Verify, cache *verifyCache) (*Desired, error) {
	pol, fromRepo, err := repoPolicy(t, v)
	if err != nil {
		return nil, err
	}
	polRev := ""
	switch {
	case fromRepo:
		polRev = revision
	case pol != nil:
		polRev = pol.Digest
	}
	names, err := t.List("pools")
	if err != nil {
		return nil, err
	}
	d := &Desired{Revision: revision, PolicyRevision: polRev, Policy: pol, PolicySource: "skipped", Pools: map[string]*PoolDesired{}, Packages: map[string]string{}}
	switch {
	case fromRepo:
		d.PolicySource = "repository"
	case pol != nil:
		d.PolicySource = "file"
	}
	for _, name := range names {
		if !pool.ValidName(name) || !t.Exists(pool.PoolFile(name)) {
			continue
		}
		pd, err := loadPool(ctx, t, name, pol, v, cache)
		if err != nil {
			return nil, err
		}
		d.Pools[name] = pd
		if v.Packages == nil || pol == nil {
			continue
		}
		for _, g := range pd.Generations {
			for _, k := range indexedKinds {
				if out := cache.packages.indexPin(ctx, pol, g, k, v.Options); out != "" {
					d.Packages[string(k)+" "+g.Pins[k].Identity()] = out
				}
			}
		}
	}
	return d, nil
}

// repoPolicy returns the verification policy at this revision, and
// whether it came from the repository (not from v.Policy).
func repoPolicy(t *gitops.Tree, v Verify) (*policy.Policy, bool, error) {
	p, err := policy.ReadFrom(t.ReadFile, pool.PolicyPath, pool.PolicyPath)
	switch {
	case err == nil:
		return p, true, nil
	case errors.Is(err, gitops.ErrNotExist) && v.Policy != nil:
		return v.Policy, false, nil
	case errors.Is(err, gitops.ErrNotExist) && v.Skip:
		return nil, false, nil
	case errors.Is(err, gitops.ErrNotExist):
		return nil, false, fmt.Errorf("runtime: the config repository holds no %s: give a policy (or skip verification explicitly)", pool.PolicyPath)
	default:
		return nil, false, err
	}
}

func loadPool(ctx context.Context, t *gitops.Tree, name string, pol *policy.Policy, v Verify, cache *verifyCache) (*PoolDesired, error) {
	pl, err := pool.ReadPool(name, t.ReadFile)
	if err != nil {
		return nil, err
	}
	state, err := pool.ReadState(name, t.ReadFile)
	if err != nil {
		return nil, err
	}
	pd := &PoolDesired{Pool: pl, State: state, Generations: map[string]*generation.Generation{}, Refused: map[string]string{}}
	for _, e := range state.Generations {
		if e.State == pool.Retained {
			continue
		}
		file := pool.GenerationFile(name, e.ID)
		b, err := t.ReadFile(file)
		if err != nil {
			pd.Refused[e.ID] = fmt.Sprintf("%s: %v", file, err)
			continue
		}
		g, err := generation.ParseNamed(b, file)
		if err == nil && g.ID != e.ID {
			err = fmt.Errorf("%s holds %s", file, g.ID)
		}
		if err == nil {
			err = g.Validate(pl.Spec.RequiredKinds)
		}
		if err == nil && pol != nil {
			err = cache.verify(ctx, pol, g, v.Options)
		}
		if err != nil {
			pd.Refused[e.ID] = err.Error()
			continue
		}
		pd.Generations[e.ID] = g
	}
	return pd, nil
}

// verify verifies g's image pins, each answered from the cache when it was
// verified before under the same policy and keys; a refusal is remembered,
// an error (a registry down) is asked again next time.
func (c *verifyCache) verify(ctx context.Context, pol *policy.Policy, g *generation.Generation, opts []policy.Option) error {
	opts = append(append([]policy.Option(nil), opts...), policy.WithCache(c.verified))
	_, err := pol.VerifyGeneration(ctx, g, time.Now(), opts...)
	return err
}

// Summary is one line per pool, for logs.
func (d *Desired) Summary() string {
	names := make([]string, 0, len(d.Pools))
	for n := range d.Pools {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		p := d.Pools[n]
		a := "none"
		if g, ok := p.Active(); ok {
			a = g.ID
		}
		parts = append(parts, fmt.Sprintf("%s: active %s, %d warm, %d refused", n, a, len(p.Warm()), len(p.Refused)))
	}
	tids := make([]string, 0, len(d.Packages))
	for id := range d.Packages {
		tids = append(tids, id)
	}
	sort.Strings(tids)
	for _, id := range tids {
		parts = append(parts, fmt.Sprintf("%s: %s", id, d.Packages[id]))
	}
	return d.Revision + ": " + strings.Join(parts, "; ")
}

// Syncer follows the config repository: it polls the branch, loads the
// desired state of each new revision, and keeps the last one that loaded.
type Syncer struct {
	repo     *gitops.Repo
	branch   string
	verify   Verify
	interval time.Duration
	now      func() time.Time

	cache  *verifyCache
	syncMu sync.Mutex // one Sync at a time: the repository is for one goroutine
	mu     sync.Mutex
	cur    *Desired
	at     time.Time // when cur was last confirmed current
	err    error     // the last sync's error, if it failed
	failed int       // syncs failed in a row
	// the failure last logged: the same error is not logged again until a
	// sync succeeds or fails otherwise (a repository that stays away, or
	// refuses the credentials, is one line, not one per sync)
	loggedErr string
	idMu      sync.Mutex // guards the two below, read by the API
	loggedID  string     // the error id of the last error logged, which /readyz's answer names
	idMsg     string     // that error's text
	log       *lineLog
	kick      chan struct{}
}

// NewSyncer follows branch of repo, every interval (default 2s).
func NewSyncer(repo *gitops.Repo, branch string, v Verify, interval time.Duration, opts ...SyncerOption) *Syncer {
	if branch == "" {
		branch = "main"
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	s := &Syncer{repo: repo, branch: branch, verify: v, interval: interval, now: time.Now,
		cache: newVerifyCache(v), kick: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Sync reads the branch now. A revision already loaded is not loaded
// again; a failure keeps the last good state (and is returned).
func (s *Syncer) Sync(ctx context.Context) (*Desired, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	t, rev, err := s.repo.Snapshot(ctx, s.branch)
	if err == nil {
		s.mu.Lock()
		same := s.cur != nil && s.cur.Revision == rev
		s.mu.Unlock()
		if same {
			s.mu.Lock()
			s.at, s.err = s.now(), nil
			d := s.cur
			s.mu.Unlock()
			s.recovered(rev)
			return d, nil
		}
		var d *Desired
		if d, err = load(ctx, t, rev, s.verify, s.cache); err == nil {
			s.mu.Lock()
			s.cur, s.at, s.err = d, s.now(), nil
			s.mu.Unlock()
			s.recovered(rev)
			return d, nil
		}
	}
	s.mu.Lock()
	s.err = err
	d, at := s.cur, s.at
	s.mu.Unlock()
	if ctx.Err() != nil {
		return d, err // the caller gave up (the runtime stops): not the repository's doing
	}
	s.failed++
	if err.Error() != s.loggedErr {
		now, id := s.now(), apierror.NewID()
		s.idMu.Lock()
		s.loggedID, s.idMsg = id, err.Error()
		s.idMu.Unlock()
		s.loggedErr = err.Error()
		again := ""
		if s.failed > 1 {
			again = fmt.Sprintf(" (%d syncs failed in a row)", s.failed)
		}
		if d == nil {
			s.log.printf("config sync failed (branch %s)%s: error %s: %s; no revision loaded yet: claims are refused (503)", s.branch, again, id, startup.OneLine(err))
		} else {
			s.log.printf("config sync failed (branch %s)%s: error %s: %s; still serving revision %s, last confirmed current %s ago: claims are refused (503) once that is older than the maximum staleness",
				s.branch, again, id, startup.OneLine(err), short(d.Revision), now.Sub(at).Round(time.Millisecond))
		}
	}
	return d, err
}

// errID is the error id the log line of the last sync's error carries,
// when msg is that error's text; "" when the syncer has not logged it.
func (s *Syncer) errID(msg string) string {
	if s == nil {
		return ""
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.loggedID == "" || s.idMsg != msg {
		return ""
	}
	return s.loggedID
}

// recovered logs a sync that succeeded after failures. Under syncMu.
func (s *Syncer) recovered(rev string) {
	if s.failed > 0 {
		s.log.logf(levelInfo, "config sync of branch %s succeeded again at revision %s after %d failed", s.branch, short(rev), s.failed)
		s.failed, s.loggedErr = 0, ""
	}
}

// Kick asks Run to sync now (POST /v1/sync).
func (s *Syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run syncs every interval, and on Kick, until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		_, _ = s.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// Current returns the last desired state that loaded (nil before the
// first), when it was last confirmed current, and the last sync's error.
func (s *Syncer) Current() (*Desired, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.at, s.err
}

// Stale reports whether the runtime's view is older than max (or absent):
// claims are refused then (503), rather than served from an old view.
func (s *Syncer) Stale(max time.Duration) bool {
	d, at, _ := s.Current()
	return d == nil || s.now().Sub(at) > max
}
