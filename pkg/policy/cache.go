package policy

import (
	"slices"
	"sync"
)

// Cache remembers verification results of targets pinned by digest, keyed
// by the policy (its document and the bytes of every key it trusts), the
// target's kind and its reference with the digest: rules match on
// repository and kind, so the same digest under another repository or kind
// is checked again. A refusal is remembered like a pass; an error (a
// registry that could not be reached) is not, so the next call tries
// again. A mutable reference (a policy allowing tags) is never cached.
//
// One Cache may be shared by goroutines and by every policy revision: a
// new revision simply misses. It grows with what it is asked; make one per
// process (a render server, the Argo CD plugin) or per run.
type Cache struct {
	mu           sync.Mutex
	results      map[string]*Result
	hits, misses int
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{results: map[string]*Result{}} }

// WithCache makes Verify (and VerifyGeneration) answer from c what it
// verified before, and remember what it verifies.
func WithCache(c *Cache) Option { return func(o *verifyOptions) { o.cache = c } }

// Stats returns how many lookups were answered from the cache and how many
// were verified.
func (c *Cache) Stats() (hits, misses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// Len is how many results the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

func cacheKey(p *Policy, t Target) string { return p.trust + "\x00" + t.Kind + "\x00" + t.Ref }

func (c *Cache) get(key string) (*Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.results[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	return r.clone(), true
}

func (c *Cache) put(key string, r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.results[key] = r.clone()
}

// clone copies r deep enough that callers cannot change the cached one.
func (r *Result) clone() *Result {
	out := *r
	out.Checks = slices.Clone(r.Checks)
	out.Signatures = slices.Clone(r.Signatures)
	out.Attestations = slices.Clone(r.Attestations)
	return &out
}
