package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/sandbox"
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
// A warm member is never changed in place: when its generation stops being
// warm it is deleted, and a claim takes it for good (release deletes it).
type Warm struct {
	backend sandbox.Backend
	art     Artifacts

	mu       sync.Mutex
	inflight map[string]int     // pool/generation -> creates in flight
	buckets  map[string]*bucket // pool -> refill budget
	now      func() time.Time
}

// NewWarm keeps warm pools on backend with artifacts from art.
func NewWarm(backend sandbox.Backend, art Artifacts) *Warm {
	return &Warm{backend: backend, art: art, inflight: map[string]int{}, buckets: map[string]*bucket{}, now: time.Now}
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
func (w *Warm) Reconcile(ctx context.Context, d *Desired) Report {
	var rep Report
	var mu sync.Mutex
	note := func(f func()) { mu.Lock(); f(); mu.Unlock() }
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
	have := map[string]int{}
	for _, s := range all {
		key := s.Pool + "/" + s.Generation
		if !wanted[key] || s.State == sandbox.StateDead {
			if err := w.backend.Delete(ctx, s.ID); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			} else {
				rep.Deleted = append(rep.Deleted, s.ID)
			}
			continue
		}
		have[key]++
	}
	var wg sync.WaitGroup
	for name, p := range d.Pools {
		size := p.Pool.Spec.WarmSize
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
					s, err := w.create(ctx, name, g, sandbox.OwnerWarm)
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

// create makes a sandbox of generation g in pool for owner.
func (w *Warm) create(ctx context.Context, pool string, g *generation.Generation, owner string) (*sandbox.Sandbox, error) {
	img, id, err := w.art.Template(ctx, g)
	if err != nil {
		return nil, err
	}
	rb, err := w.art.Runner(ctx, g)
	if err != nil {
		return nil, err
	}
	return w.backend.Create(ctx, sandbox.Spec{Pool: pool, Generation: g.ID, Owner: owner, Template: img, TemplateID: id, Runner: rb, Network: sandbox.NetworkDeny})
}

// Claim hands claimID a sandbox of pool's active generation in d, checked
// again here: a ready warm member if there is one (taken with a
// compare-and-swap of its owner, so two claims never share one), else a
// cold start. warm says which.
func (w *Warm) Claim(ctx context.Context, d *Desired, pool, claimID string) (s *sandbox.Sandbox, warm bool, err error) {
	p, ok := d.Pools[pool]
	if !ok {
		return nil, false, fmt.Errorf("%w: %q", ErrNoPool, pool)
	}
	g, ok := p.Active()
	if !ok {
		return nil, false, fmt.Errorf("%w: %s", ErrNoActive, pool)
	}
	members, err := w.backend.List(ctx, sandbox.Filter{Pool: pool, Generation: g.ID, Owner: sandbox.OwnerWarm, State: sandbox.StateRunning})
	if err != nil {
		return nil, false, err
	}
	for _, m := range members {
		if m.Generation != g.ID {
			continue // never a member of another generation
		}
		taken, err := w.backend.SetOwner(ctx, m.ID, sandbox.OwnerWarm, claimID)
		if errors.Is(err, sandbox.ErrOwnerConflict) {
			continue // another claim took it first
		}
		if err != nil {
			return nil, false, err
		}
		return taken, true, nil
	}
	s, err = w.create(ctx, pool, g, claimID)
	return s, false, err
}

// Release ends a claim: its sandbox is deleted, never returned to the pool.
func (w *Warm) Release(ctx context.Context, id string) error { return w.backend.Delete(ctx, id) }

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

// Template returns the workspace template image and its digest.
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
	rb, err := sandbox.UnpackRunner(ctx, img, filepath.Join(a.dir, "runners", strings.TrimPrefix(d.DigestStr(), "sha256:")))
	if err != nil {
		return sandbox.RunnerBinary{}, fmt.Errorf("runtime: runner %s: %w", d, err)
	}
	a.runners[d.DigestStr()] = rb
	return rb, nil
}
