package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/slipway-dev/slipway/internal/atomicfile"
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
	// inflight holds a channel per key being verified now, closed when it
	// is done: a second caller of the same key waits for the first one's
	// result rather than verifying it again.
	inflight map[string]chan struct{}
	// dir, when set, also holds every passing result, one file per key.
	dir string
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{results: map[string]*Result{}, inflight: map[string]chan struct{}{}}
}

// OpenCache returns a cache that also keeps its passing results in dir
// (created 0700 if missing), one file per key named by the key's SHA-256,
// so that processes run one after another share them: the Argo CD
// plugin's generate is a new process for every render. Only passes are
// written: a refusal (an image not signed yet) is remembered by this
// process alone, so signing the image later is seen by the next one. A
// file that cannot be read or does not hold the key's result is a miss.
// Whoever can write dir can make a refusal pass: keep it private to the
// process (an emptyDir of the plugin's container).
func OpenCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("policy: verification cache: %w", err)
	}
	c := NewCache()
	c.dir = dir
	return c, nil
}

// stored is a result as OpenCache's directory holds it.
type stored struct {
	Key    string  `json:"key"`
	Result *Result `json:"result"`
}

func (c *Cache) file(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:])+".json")
}

// load reads key's result from the directory, nil when there is none.
func (c *Cache) load(key string) *Result {
	b, err := os.ReadFile(c.file(key))
	if err != nil {
		return nil
	}
	var s stored
	sum := sha256.Sum256([]byte(key))
	if json.Unmarshal(b, &s) != nil || s.Result == nil || !s.Result.Verified || s.Key != hex.EncodeToString(sum[:]) {
		return nil
	}
	return s.Result
}

// store writes a passing result to the directory; a failure to write only
// costs the next process a verification.
func (c *Cache) store(key string, r *Result) {
	sum := sha256.Sum256([]byte(key))
	b, err := json.Marshal(stored{Key: hex.EncodeToString(sum[:]), Result: r})
	if err != nil {
		return
	}
	_ = atomicfile.Write(c.file(key), b, 0o600)
}

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

// lookup answers key from the cache (a hit), or says that another caller
// is verifying it now (wait on the channel, then look again), or, a miss,
// makes the caller the one verifying it: it must call done.
func (c *Cache) lookup(key string) (res *Result, wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.results[key]
	if !ok && c.dir != "" {
		if r = c.load(key); r != nil {
			c.results[key], ok = r, true
		}
	}
	if ok {
		c.hits++
		return r.clone(), nil
	}
	if ch, busy := c.inflight[key]; busy {
		return nil, ch
	}
	c.misses++
	c.inflight[key] = make(chan struct{})
	return nil, nil
}

// done ends the verification of key lookup handed out: its result is
// kept unless err says it did not finish, and its waiters look again.
func (c *Cache) done(key string, r *Result, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.results[key] = r.clone()
		if c.dir != "" && r.Verified {
			c.store(key, r)
		}
	}
	if ch, ok := c.inflight[key]; ok {
		close(ch)
		delete(c.inflight, key)
	}
}

// clone copies r deep enough that callers cannot change the cached one.
func (r *Result) clone() *Result {
	out := *r
	out.Checks = slices.Clone(r.Checks)
	out.Signatures = slices.Clone(r.Signatures)
	out.Attestations = slices.Clone(r.Attestations)
	return &out
}
