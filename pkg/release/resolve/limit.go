package resolve

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// DefaultConcurrency is the default number of look-ups in flight per registry.
const DefaultConcurrency = 16

// Limit bounds the look-ups in flight per registry host to n, whatever the
// number of callers, so a large tree never floods one registry.
func Limit(r Resolver, n int) Resolver {
	if n < 1 {
		n = 1
	}
	return &limited{inner: r, n: n, sems: map[string]chan struct{}{}}
}

type limited struct {
	inner Resolver
	n     int

	mu   sync.Mutex
	sems map[string]chan struct{}
}

func (l *limited) sem(registry string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sems[registry]
	if !ok {
		s = make(chan struct{}, l.n)
		l.sems[registry] = s
	}
	return s
}

func (l *limited) Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error) {
	if r.IsPinned() {
		return l.inner.Resolve(ctx, r)
	}
	s := l.sem(r.Registry())
	select {
	case s <- struct{}{}:
	case <-ctx.Done():
		return ref.Pin{}, context.Cause(ctx)
	}
	defer func() { <-s }()
	return l.inner.Resolve(ctx, r)
}

// Dedupe makes concurrent look-ups of the same reference (however spelled:
// "nginx:1.25" and "docker.io/library/nginx:1.25" are one) share one request.
func Dedupe(r Resolver) Resolver { return &deduped{inner: r} }

type deduped struct {
	inner Resolver
	g     singleflight.Group
}

func (d *deduped) Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error) {
	v, err, _ := d.g.Do(r.Canonical(), func() (any, error) {
		// Detach from this caller's cancellation: other callers share the result.
		return d.inner.Resolve(context.WithoutCancel(ctx), r)
	})
	if err != nil {
		return ref.Pin{}, err
	}
	return restamp(v.(ref.Pin), r), nil
}

// Cache remembers successful look-ups for the life of the returned resolver,
// so a reference is asked for once per run. Failures are not cached.
func Cache(r Resolver) Resolver { return &cached{inner: r} }

type cached struct {
	inner Resolver
	m     sync.Map // canonical reference -> ref.Pin
}

func (c *cached) Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error) {
	key := r.Canonical()
	if v, ok := c.m.Load(key); ok {
		return restamp(v.(ref.Pin), r), nil
	}
	p, err := c.inner.Resolve(ctx, r)
	if err != nil {
		return ref.Pin{}, err
	}
	c.m.Store(key, p)
	return p, nil
}

// restamp gives a shared pin the caller's spelling of the name and tag.
func restamp(p ref.Pin, r ref.Reference) ref.Pin {
	return ref.PinOf(r, p.Digest, p.Origin)
}

// Stack is the resolver most callers want: a cache over de-duplicated look-ups
// limited to concurrency per registry.
func Stack(r Resolver, concurrency int) Resolver {
	return Cache(Dedupe(Limit(r, concurrency)))
}
