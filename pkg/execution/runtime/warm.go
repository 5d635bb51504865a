package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Artifacts fetches what a sandbox of a generation is made from: the
// workspace template image (by the digest the generation pins) and the
// runner binary (unpacked from the runner image it pins).
type Artifacts interface {
	Template(ctx context.Context, g *generation.Generation) (v1.Image, string, error)
	Runner(ctx context.Context, g *generation.Generation) (sandbox.RunnerBinary, error)
}

// ErrNoPool marks a claim on a pool the desired state does not have.
var ErrNoPool = errors.New("runtime: no such pool")

// ErrNoActive marks a claim on a pool with no active generation.
var ErrNoActive = errors.New("runtime: the pool has no active generation")

// Warm keeps each pool's warm sandboxes: WarmSize ready members of every
// generation the desired state wants warm, created at most RefillPerSecond,
// counting its own creates in flight so it never creates more than asked.
// It runs at most GOMAXPROCS creates at once (at least two; refills and
// cold starts alike).
// A warm member is never changed in place: when its generation stops being
// warm it is deleted, and a claim takes it for good (release deletes it).
type Warm struct {
	backend sandbox.Backend
	// cluster is backend when the cluster keeps its warm pools: then Warm
	// creates no warm member, and a claim is a Create.
	cluster sandbox.ClusterPools
	art     Artifacts
	log     *repeatLog
	// enforcement is what the backend enforces of pool.yaml's limits (nil:
	// none); fixed when the Warm is made.
	enforcement *sandbox.Enforcement
	// ledger records the time of each sandbox in each state (nil: none).
	ledger StateLedger

	mu       sync.Mutex
	inflight map[string]int       // pool/generation -> creates in flight
	buckets  map[string]*bucket   // pool -> refill budget
	ready    map[string][]readyAt // pool/generation -> members a claim may try, oldest first
	taken    map[string]uint64    // member id -> seq when a claim took it from ready
	seq      uint64               // counts changes to ready
	now      func() time.Time

	creating chan struct{} // a slot per create running (maxCreates)

	alive map[string]time.Time // member id -> when its runner last answered (w.mu)
	hit   atomic.Int64         // unix nanoseconds of the last warm hit taken

	grantMu   sync.Mutex
	granting  int           // claims taking a warm member, or granting one they took
	granted   chan struct{} // closed when granting drops to 0
	coldYield time.Duration // the longest a cold start yields (coldYield)
}

// Liveness of warm members: Reconcile pings the ready members whose runner
// has not answered for livenessEvery, so a claim can hand out a member that
// answered within its runtime's ready freshness without pinging it again.
const (
	livenessEvery   = 500 * time.Millisecond
	livenessTimeout = time.Second
	livenessJobs    = 8
	// A cold start waits while warm hits are being granted and until no
	// warm hit was taken for hitQuiet (at most coldYield), so that in a
	// burst the warm hits are granted first and the seconds of bubblewrap
	// starts do not slow their milliseconds.
	hitQuiet  = 10 * time.Millisecond
	coldYield = 100 * time.Millisecond
)

// readyAt is a warm member in Warm.ready, with the seq it was put there at.
//
// ready is a hint that spares each claim a List of the whole pool (and
// concurrent claims each other's members): Reconcile refreshes it from the
// backend, its creates add to it, and a claim takes from it under w.mu,
// so two claims of this Warm never try the same member. The owner
// compare-and-swap on the backend still decides: a member another process
// took, or one that died, fails it and the claim tries the next.
type readyAt struct {
	s   *sandbox.Sandbox
	seq uint64
}

// NewWarm keeps warm pools on backend with artifacts from art. A backend
// whose cluster keeps the warm pools (sandbox.ClusterPools: Kubernetes,
// where agent-sandbox's SandboxWarmPool of each warming and active
// generation is rendered from the config repository) gets no warm member
// from Warm: Reconcile does nothing, a claim is a Create on the active
// generation (the cluster hands it a warm member, or cold-starts one), a
// proof claim a Create on the warming generation, marked as a proof.
func NewWarm(backend sandbox.Backend, art Artifacts, opts ...WarmOption) *Warm {
	w := &Warm{backend: backend, art: art, inflight: map[string]int{}, buckets: map[string]*bucket{},
		ready: map[string][]readyAt{}, taken: map[string]uint64{}, now: time.Now,
		creating: make(chan struct{}, maxCreates()), alive: map[string]time.Time{}, coldYield: coldYield}
	w.cluster, _ = backend.(sandbox.ClusterPools)
	w.enforcement = enforcement(backend)
	for _, opt := range opts {
		opt(w)
	}
	return w
}

// prefetch fetches the template image and the runner binary of every
// generation d keeps warm (Artifacts keeps them by digest), so that the
// first claim of a generation on a cluster finds them, instead of
// fetching the template's manifest and config and unpacking the runner on
// its path (72-78 ms of B13b's first claim in cluster). A failure is
// logged (once per backoff); a claim that needs what is missing fetches it
// again and fails with its own error.
func (w *Warm) prefetch(ctx context.Context, d *Desired) {
	for name, p := range d.Pools {
		for _, g := range p.Warm() {
			key := "artifacts " + name + " " + g.ID // not a create's key: ok forgets a key's failures
			_, _, err := w.art.Template(ctx, g)
			if err == nil {
				_, err = w.art.Runner(ctx, g)
			}
			if err != nil {
				if ctx.Err() == nil {
					w.log.failure(key, fmt.Sprintf("artifacts of pool %s, generation %s: %v", name, g.ID, err))
				}
				continue
			}
			w.log.ok(key, "artifacts of pool "+name+", generation "+g.ID)
		}
	}
}

// Report says what one Reconcile did.
type Report struct {
	Created []string `json:"created,omitempty"`
	Deleted []string `json:"deleted,omitempty"`
	// Errors are creates or deletes that failed; the next Reconcile tries
	// again.
	Errors []string `json:"errors,omitempty"`
}

// Reconcile brings the backend's warm sandboxes toward d once: it deletes
// warm members of generations d no longer wants warm (and dead ones), and
// starts the creates each warm generation is short of, within the pool's
// refill rate. Creates run concurrently and are counted while in flight;
// Reconcile waits for the ones it started.
//
// With a backend whose cluster keeps the warm pools it creates and deletes
// nothing: it fetches the artifacts of the generations d keeps warm
// (prefetch), so that a claim does not.
func (w *Warm) Reconcile(ctx context.Context, d *Desired) Report {
	var rep Report
	if w.cluster != nil {
		w.prefetch(ctx, d)
		return rep
	}
	var mu sync.Mutex
	note := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	w.mu.Lock()
	listed := w.seq
	w.mu.Unlock()
	all, err := w.backend.List(ctx, sandbox.Filter{Owner: sandbox.OwnerWarm})
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		return rep
	}
	wanted := map[string]bool{} // pool/generation
	for name, p := range d.Pools {
		for _, g := range p.Warm() {
			wanted[name+"/"+g.ID] = true
		}
	}
	nets := map[string]bounds{} // a warm member made for other settings is retired
	for name, p := range d.Pools {
		if b, err := poolBounds(p.Pool, w.enforcement); err == nil {
			nets[name] = b
		}
	}
	have := map[string]int{}
	for _, s := range all {
		key := s.Pool + "/" + s.Generation
		b, known := nets[s.Pool]
		if wanted[key] && s.State != sandbox.StateDead && known && b.fits(s) { // a pool the runtime refuses keeps no members
			have[key]++
			continue
		}
		if deleted, err := w.retire(ctx, s); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else if deleted {
			rep.Deleted = append(rep.Deleted, s.ID)
		}
	}
	w.refreshReady(wanted, all, listed)
	w.checkLiveness(ctx)
	var wg sync.WaitGroup
	for name, p := range d.Pools {
		size := p.Pool.Spec.WarmSize
		lim, err := poolBounds(p.Pool, w.enforcement)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		for _, g := range p.Warm() {
			key := name + "/" + g.ID
			if n := stateWarmSize(p, g.ID); n > 0 {
				size = n
			}
			for n := w.claimSlots(key, name, size-have[key], p.Pool.Spec.RefillPerSecond); n > 0; n-- {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer w.done(key)
					s, err := w.create(ctx, name, g, sandbox.OwnerWarm, false, lim)
					if err == nil {
						w.addReady(key, s)
					}
					note(func() {
						if err != nil {
							rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", key, err))
						} else {
							rep.Created = append(rep.Created, s.ID)
						}
					})
				}()
			}
		}
	}
	wg.Wait()
	return rep
}

// ownerRetiring owns a warm member Reconcile took out of its pool to
// delete it.
const ownerRetiring = "retiring"

// retire deletes s, a warm member as a List saw it that is dead or of a
// generation no longer warm. A claim may have taken it since: a running
// member is first taken from the pool with the same compare-and-swap of its
// owner a claim uses, and left alone when a claim won. One still starting
// is left for a later Reconcile (it cannot be claimed before it runs).
func (w *Warm) retire(ctx context.Context, s *sandbox.Sandbox) (deleted bool, err error) {
	switch s.State {
	case sandbox.StateStarting:
		return false, nil
	case sandbox.StateRunning:
		_, err := w.backend.SetOwner(ctx, s.ID, sandbox.OwnerWarm, ownerRetiring)
		switch {
		case errors.Is(err, sandbox.ErrOwnerConflict), errors.Is(err, sandbox.ErrNotFound):
			return false, nil // a claim took it, or it is gone
		case err != nil && !errors.Is(err, sandbox.ErrNotRunning): // a member that died is deleted
			return false, err
		}
	}
	if err := w.backend.Delete(ctx, s.ID); err != nil {
		return false, err
	}
	w.leave(s.ID)
	return true, nil
}

// refreshReady replaces the ready members of every wanted pool/generation
// with the running ones all (a List begun at seq listed) shows, keeping
// those added since and leaving out those taken since.
func (w *Warm) refreshReady(wanted map[string]bool, all []*sandbox.Sandbox, listed uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := map[string][]readyAt{}
	in := map[string]bool{}
	for key := range wanted {
		for _, r := range w.ready[key] {
			if r.seq > listed { // added after the List began
				next[key] = append(next[key], r)
				in[r.s.ID] = true
			}
		}
	}
	for _, s := range all {
		key := s.Pool + "/" + s.Generation
		if !wanted[key] || s.State != sandbox.StateRunning || in[s.ID] {
			continue
		}
		if at, ok := w.taken[s.ID]; ok && at > listed {
			continue // a claim took it after the List began
		}
		next[key] = append(next[key], readyAt{s: s, seq: listed})
	}
	for key := range wanted {
		slices.SortFunc(next[key], func(x, y readyAt) int { return x.s.Created.Compare(y.s.Created) })
		if next[key] == nil {
			next[key] = []readyAt{} // known, and empty
		}
	}
	w.ready = next
	for id, at := range w.taken {
		if at <= listed {
			delete(w.taken, id) // the List saw its new owner
		}
	}
}

// checkLiveness pings the ready members not heard from for livenessEvery
// and records when each answered; members gone from ready are forgotten.
func (w *Warm) checkLiveness(ctx context.Context) {
	w.mu.Lock()
	now := w.now()
	var due []*sandbox.Sandbox
	keep := map[string]time.Time{}
	for _, rs := range w.ready {
		for _, r := range rs {
			at, ok := w.alive[r.s.ID]
			if ok {
				keep[r.s.ID] = at
			}
			if !ok || now.Sub(at) >= livenessEvery {
				due = append(due, r.s)
			}
		}
	}
	w.alive = keep
	w.mu.Unlock()
	var wg sync.WaitGroup
	jobs := make(chan struct{}, livenessJobs)
	for _, s := range due {
		wg.Add(1)
		jobs <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-jobs }()
			if ping(ctx, s, livenessTimeout) == nil {
				w.markAlive(s.ID)
			}
		}()
	}
	wg.Wait()
}

func (w *Warm) markAlive(id string) {
	w.mu.Lock()
	w.alive[id] = w.now()
	w.mu.Unlock()
}

// answered reports whether member id's runner answered within the last d.
func (w *Warm) answered(id string, d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.alive[id]
	return ok && w.now().Sub(at) < d
}

// yieldToHits lets warm hits of a burst go first: it waits until no claim
// is taking or granting a warm member and none was taken for hitQuiet, for
// at most coldYield.
func (w *Warm) yieldToHits(ctx context.Context) {
	deadline := time.NewTimer(w.coldYield)
	defer deadline.Stop()
	for {
		var granted <-chan struct{}
		w.grantMu.Lock()
		if w.granting > 0 {
			granted = w.granted
		}
		w.grantMu.Unlock()
		var quiet <-chan time.Time
		if granted == nil {
			wait := time.Until(time.Unix(0, w.hit.Load()).Add(hitQuiet))
			if wait <= 0 {
				return
			}
			quiet = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-granted:
		case <-quiet:
		}
	}
}

// beginGrant counts a claim that may take a warm member until the
// returned func (repeat-safe) is called: meanwhile cold starts yield.
func (w *Warm) beginGrant() (end func()) {
	w.grantMu.Lock()
	if w.granting == 0 {
		w.granted = make(chan struct{})
	}
	w.granting++
	w.grantMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.grantMu.Lock()
			if w.granting--; w.granting == 0 {
				close(w.granted)
			}
			w.grantMu.Unlock()
		})
	}
}

// addReady puts a member Reconcile created into ready, unless key is not
// known there (no longer wanted, or not listed yet: a claim lists then).
func (w *Warm) addReady(key string, s *sandbox.Sandbox) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, known := w.ready[key]; !known {
		return
	}
	w.seq++
	w.ready[key] = append(w.ready[key], readyAt{s: s, seq: w.seq})
	w.alive[s.ID] = w.now() // its runner just proved its identity
}

// takeReady takes the oldest ready member of key; known is false when no
// Reconcile has listed key's members yet.
func (w *Warm) takeReady(key string) (s *sandbox.Sandbox, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs, known := w.ready[key]
	if len(rs) == 0 {
		return nil, known
	}
	w.ready[key] = rs[1:]
	w.seq++
	w.taken[rs[0].s.ID] = w.seq
	w.hit.Store(time.Now().UnixNano())
	return rs[0].s, true
}

// stateWarmSize is the warm size the pool state gives generation id (0:
// the pool's default).
func stateWarmSize(p *PoolDesired, id string) int {
	for _, s := range p.State.Generations {
		if s.ID == id {
			return s.WarmSize
		}
	}
	return 0
}

// bucket is a token bucket: rate tokens a second, holding at most
// max(1, rate) (so a pool may start that many creates at once).
type bucket struct {
	tokens float64
	at     time.Time
}

// claimSlots reserves up to short creates for key, minus those in flight,
// within pool's refill budget.
func (w *Warm) claimSlots(key, pool string, short int, rate float64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := short - w.inflight[key]
	if n <= 0 {
		return 0
	}
	if rate > 0 {
		capacity := max(1, rate)
		now := w.now()
		b := w.buckets[pool]
		if b == nil {
			b = &bucket{tokens: capacity, at: now}
			w.buckets[pool] = b
		}
		b.tokens = min(capacity, b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
		n = min(n, int(b.tokens))
		if n <= 0 {
			return 0
		}
		b.tokens -= float64(n)
	}
	w.inflight[key] += n
	return n
}

func (w *Warm) done(key string) {
	w.mu.Lock()
	w.inflight[key]--
	w.mu.Unlock()
}

// create makes a sandbox of generation g in pool for owner, and logs why
// when it cannot.
func (w *Warm) create(ctx context.Context, pool string, g *generation.Generation, owner string, proof bool, lim bounds) (*sandbox.Sandbox, error) {
	s, err := w.createSandbox(ctx, pool, g, owner, proof, lim)
	key := pool + " " + g.ID
	switch {
	case err == nil:
		w.log.ok(key, "sandbox create: pool "+pool+", generation "+g.ID)
	case ctx.Err() == nil: // not when the caller gave up
		w.log.failure(key, fmt.Sprintf("sandbox create failed: pool %s, generation %s, for %s: %v", pool, g.ID, owner, err))
	}
	return s, err
}

func (w *Warm) createSandbox(ctx context.Context, pool string, g *generation.Generation, owner string, proof bool, lim bounds) (*sandbox.Sandbox, error) {
	img, id, err := w.art.Template(ctx, g)
	if err != nil {
		return nil, err
	}
	rb, err := w.art.Runner(ctx, g)
	if err != nil {
		return nil, err
	}
	if w.cluster == nil { // a claim on a cluster costs this host no CPU: no turn to wait for
		select {
		case w.creating <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("runtime: waiting to create a sandbox of %s: %w", g.ID, ctx.Err())
		}
		defer func() { <-w.creating }()
	}
	s, err := w.backend.Create(ctx, sandbox.Spec{Pool: pool, Generation: g.ID, Owner: owner, Template: img, TemplateID: id, Runner: rb, Network: lim.network, Allow: lim.allow, Shape: lim.shape, Proof: proof, Limits: lim.limits})
	if err == nil {
		// The sandbox has used the host since it began starting; a
		// cluster's member may have waited warm there before this claim.
		at := s.Created
		if at.IsZero() || w.cluster != nil {
			at = time.Now()
		}
		w.enter(s, owner, proof, at)
	}
	return s, err
}

// maxCreates is how many sandboxes a Warm creates at once (refills and
// cold starts together; the others wait their turn): one per CPU Go uses,
// at least two. Starting a sandbox is CPU work on the host; more at once
// finish no sooner (150 cold starts on 2 CPUs: the last ended after about
// 10 s unlimited, 6 s two at a time), each takes longer, and together they
// take the CPU and the disk from warm claims.
func maxCreates() int { return max(2, goruntime.GOMAXPROCS(0)) }

// Claim hands claimID a sandbox of pool's active generation in d, checked
// again here: a ready warm member if there is one (taken with a
// compare-and-swap of its owner, so two claims never share one), else a
// cold start. warm says which. Members are taken oldest first from those
// Reconcile found and created (a List of the backend only before the
// first Reconcile that wanted the generation), so a claim costs no List
// of the pool and concurrent claims do not race for the same member.
func (w *Warm) Claim(ctx context.Context, d *Desired, pool, claimID string) (s *sandbox.Sandbox, warm bool, err error) {
	s, warm, granted, err := w.claim(ctx, d, pool, claimID)
	granted()
	return s, warm, err
}

// claim is Claim for a caller with more to do before a warm hit is granted
// (a Runtime records its manifest): until it calls granted, cold starts
// yield to the hit. granted is never nil.
func (w *Warm) claim(ctx context.Context, d *Desired, pool, claimID string) (s *sandbox.Sandbox, warm bool, granted func(), err error) {
	granted = w.beginGrant()
	defer func() {
		if !warm {
			granted()
		}
	}()
	p, ok := d.Pools[pool]
	if !ok {
		return nil, false, granted, fmt.Errorf("%w: %q", ErrNoPool, pool)
	}
	g, ok := p.Active()
	if !ok {
		return nil, false, granted, fmt.Errorf("%w: %s", ErrNoActive, pool)
	}
	lim, err := poolBounds(p.Pool, w.enforcement)
	if err != nil {
		return nil, false, granted, err
	}
	if w.cluster != nil {
		s, err = w.create(ctx, pool, g, claimID, false, lim)
		return s, err == nil && launchedWarm(s), granted, err
	}
	taken, err := w.take(ctx, pool, g, claimID, false, lim)
	if err != nil {
		return nil, false, granted, err
	}
	if taken != nil {
		return taken, true, granted, nil
	}
	granted()
	w.yieldToHits(ctx)
	s, err = w.create(ctx, pool, g, claimID, false, lim)
	return s, false, granted, err
}

// launchedWarm says whether a cluster handed s to its claim from a warm
// pool.
func launchedWarm(s *sandbox.Sandbox) bool {
	return s.Placement != nil && s.Placement.LaunchType == sandbox.LaunchWarm
}

// take takes a ready warm member of generation g of pool for owner
// claimID (a proof claim's when proof) with the owner compare-and-swap, or
// returns nil when none is ready; it never creates one.
func (w *Warm) take(ctx context.Context, pool string, g *generation.Generation, claimID string, proof bool, lim bounds) (*sandbox.Sandbox, error) {
	key := pool + "/" + g.ID
	var listed []*sandbox.Sandbox // when no Reconcile has listed key yet
	for {
		m, known := w.takeReady(key)
		if !known && listed == nil {
			var err error
			listed, err = w.backend.List(ctx, sandbox.Filter{Pool: pool, Generation: g.ID, Owner: sandbox.OwnerWarm, State: sandbox.StateRunning})
			if err != nil {
				return nil, err
			}
			listed = append(listed, nil) // the end: listed is never nil again
		}
		if !known {
			m, listed = listed[0], listed[1:]
		}
		if m == nil {
			return nil, nil
		}
		if m.Pool != pool || m.Generation != g.ID {
			continue // never a member of another pool or generation
		}
		if !lim.fits(m) {
			_, _ = w.retire(ctx, m) // made for the pool's old settings: never handed out
			continue
		}
		taken, err := w.backend.SetOwner(ctx, m.ID, sandbox.OwnerWarm, claimID)
		if errors.Is(err, sandbox.ErrOwnerConflict) || errors.Is(err, sandbox.ErrNotRunning) || errors.Is(err, sandbox.ErrNotFound) {
			continue // another claim took it first, or it is gone
		}
		if err != nil {
			return nil, err
		}
		w.enter(taken, claimID, proof, time.Now())
		return taken, nil
	}
}

// Release ends a claim: its sandbox is deleted, never returned to the pool.
func (w *Warm) Release(ctx context.Context, id string) error {
	if err := w.backend.Delete(ctx, id); err != nil {
		return err
	}
	w.leave(id)
	return nil
}

// RegistryArtifacts fetches templates and runners from their registries by
// the digests the generation pins, once per digest, unpacking runners
// under dir.
type RegistryArtifacts struct {
	dir  string
	opts []remote.Option

	mu        sync.Mutex
	templates map[string]v1.Image
	runners   map[string]sandbox.RunnerBinary
}

// NewRegistryArtifacts unpacks runners under dir; opts reach the registry.
func NewRegistryArtifacts(dir string, opts ...remote.Option) *RegistryArtifacts {
	return &RegistryArtifacts{dir: dir, opts: opts, templates: map[string]v1.Image{}, runners: map[string]sandbox.RunnerBinary{}}
}

func pinned(g *generation.Generation, k generation.Kind) (name.Digest, error) {
	pin, ok := g.Pins[k]
	if !ok || pin.Form() != generation.FormImage {
		return name.Digest{}, fmt.Errorf("runtime: %s pins no %s image", g.ID, k)
	}
	return name.NewDigest(pin.Image)
}

// Template returns the workspace template image and its digest. The
// image is kept for later callers with its config read under ctx: a
// remote image fetches what it has not read yet with the context it was
// made with, so a config left unread would be fetched, later, with the
// first caller's context, which has ended by then (a claim on a cluster
// reads none of it; a rollout's template-tests proof on a generation
// keeping the template then failed with "context canceled").
func (a *RegistryArtifacts) Template(ctx context.Context, g *generation.Generation) (v1.Image, string, error) {
	d, err := pinned(g, generation.WorkspaceTemplate)
	if err != nil {
		return nil, "", err
	}
	a.mu.Lock()
	img, ok := a.templates[d.DigestStr()]
	a.mu.Unlock()
	if !ok {
		if img, err = remote.Image(d, append([]remote.Option{remote.WithContext(ctx)}, a.opts...)...); err != nil {
			return nil, "", fmt.Errorf("runtime: template %s: %w", d, err)
		}
		if _, err := img.RawConfigFile(); err != nil {
			return nil, "", fmt.Errorf("runtime: template %s: its config: %w", d, err)
		}
		a.mu.Lock()
		a.templates[d.DigestStr()] = img
		a.mu.Unlock()
	}
	return img, d.DigestStr(), nil
}

// Runner returns the runner binary of the generation's runner image,
// unpacked (and checked against the image's label) once.
func (a *RegistryArtifacts) Runner(ctx context.Context, g *generation.Generation) (sandbox.RunnerBinary, error) {
	d, err := pinned(g, generation.Runner)
	if err != nil {
		return sandbox.RunnerBinary{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if rb, ok := a.runners[d.DigestStr()]; ok {
		return rb, nil
	}
	img, err := remote.Image(d, append([]remote.Option{remote.WithContext(ctx)}, a.opts...)...)
	if err != nil {
		return sandbox.RunnerBinary{}, fmt.Errorf("runtime: runner %s: %w", d, err)
	}
	dir := filepath.Join(a.dir, "runners", strings.TrimPrefix(d.DigestStr(), "sha256:"))
	// What an earlier process left there (a runtime restarted on the same
	// state, or one killed while unpacking) is unpacked again: UnpackRunner
	// wants an empty directory, and a runner is small.
	if err := os.RemoveAll(dir); err != nil {
		return sandbox.RunnerBinary{}, fmt.Errorf("runtime: runner %s: %w", d, err)
	}
	rb, err := sandbox.UnpackRunner(ctx, img, dir)
	if err != nil {
		return sandbox.RunnerBinary{}, fmt.Errorf("runtime: runner %s: %w", d, err)
	}
	a.runners[d.DigestStr()] = rb
	return rb, nil
}
