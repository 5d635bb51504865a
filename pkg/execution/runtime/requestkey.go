package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// Errors of request keys.
var (
	// ErrRequestKeyInvalid: a request key is not 1 to MaxRequestKey
	// characters of [A-Za-z0-9._:-] (HTTP 400).
	ErrRequestKeyInvalid = errors.New("runtime: invalid request key")
	// ErrRequestKeyUsed: a request key names a claim that has ended
	// (released, stopped, or finalised after a restart), or one of another
	// pool or tenant; it grants nothing (HTTP 409).
	ErrRequestKeyUsed = errors.New("runtime: request key already used")
)

// MaxRequestKey is the longest request key.
const MaxRequestKey = 128

// CheckRequestKey says whether k is a valid request key: 1 to
// MaxRequestKey characters of [A-Za-z0-9._:-]. Errors wrap
// ErrRequestKeyInvalid and name the key (shortened when long).
func CheckRequestKey(k string) error {
	if k == "" || len(k) > MaxRequestKey {
		return fmt.Errorf("%w: %q: want 1 to %d characters, got %d", ErrRequestKeyInvalid, shorten(k), MaxRequestKey, len(k))
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return fmt.Errorf("%w: %q: character %q at %d is not one of [A-Za-z0-9._:-]", ErrRequestKeyInvalid, shorten(k), c, i)
		}
	}
	return nil
}

func shorten(k string) string {
	if len(k) > MaxRequestKey {
		return k[:MaxRequestKey] + "..."
	}
	return k
}

// keyed is the claim of one request key: done is closed once the first
// request with the key has an outcome; c is its claim when it was granted
// (nil when it failed, and the key is free again).
type keyed struct {
	done chan struct{}
	c    *claim
}

// claimKeyed is Claim for a request with a key. The first request with a
// key claims (unless the runs store says the key's claim has ended);
// requests with the same key meanwhile wait for it, then answer its grant
// again.
func (r *Runtime) claimKeyed(ctx context.Context, req ClaimRequest) (*runtimeapi.Grant, error) {
	key := req.RequestKey
	if err := CheckRequestKey(key); err != nil {
		return nil, err
	}
	for {
		r.mu.Lock()
		k := r.keys[key]
		if k == nil {
			k = &keyed{done: make(chan struct{})}
			r.keys[key] = k
			r.mu.Unlock()
			c, err := r.firstKeyed(ctx, req)
			r.mu.Lock()
			if c != nil {
				k.c = c
			} else {
				delete(r.keys, key)
			}
			close(k.done)
			r.mu.Unlock()
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.grant(), nil
		}
		r.mu.Unlock()
		select {
		case <-k.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if k.c == nil {
			continue // the first request failed: this one claims
		}
		g, err := r.adopt(ctx, k, req)
		if g != nil || err != nil {
			return g, err
		}
	}
}

// firstKeyed claims for the first request with a key this Runtime has no
// claim of, unless the runs store holds a run with that key already.
func (r *Runtime) firstKeyed(ctx context.Context, req ClaimRequest) (*claim, error) {
	// A draining runtime answers only the keys of the claims it holds
	// (adopt): a new one is refused before anything is recorded, so the
	// key stays unused for another replica.
	if r.Draining() {
		return nil, ErrDraining
	}
	ids, err := r.store.Query(ctx, runmanifest.Query{RequestKey: req.RequestKey, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("runtime: request key %q: %w", req.RequestKey, err)
	}
	if len(ids) > 0 {
		return nil, r.keyUsed(ctx, req.RequestKey, ids[0])
	}
	return r.newClaim(ctx, req)
}

// adopt answers a request whose key names open claim k.c: its current
// grant, Adopted. When the claim has ended meanwhile, the key is
// forgotten and adopt returns nil, nil: the caller looks again (and finds
// the ended run in the store).
func (r *Runtime) adopt(ctx context.Context, k *keyed, req ClaimRequest) (*runtimeapi.Grant, error) {
	c := k.c
	r.mu.Lock()
	held := r.claims[c.runID] == c
	if !held && r.keys[req.RequestKey] == k {
		delete(r.keys, req.RequestKey)
	}
	r.mu.Unlock()
	if !held {
		return nil, nil
	}
	if c.pool != req.Pool || c.tenant != req.Tenant {
		return nil, fmt.Errorf("%w: request key %q names run %s of pool %q and tenant %q, not pool %q and tenant %q",
			ErrRequestKeyUsed, req.RequestKey, c.runID, c.pool, c.tenant, req.Pool, req.Tenant)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil, r.keyUsed(ctx, req.RequestKey, c.runID)
	}
	g := c.grant()
	g.Adopted = true
	return g, nil
}

// keyUsed is the refusal of request key key, whose claim was run runID and
// is not open in this Runtime: released (with its status) or, when the
// manifest is still open, a run this Runtime does not hold.
func (r *Runtime) keyUsed(ctx context.Context, key, runID string) error {
	m, err := r.store.Get(ctx, runID)
	switch {
	case err != nil:
		return fmt.Errorf("%w: request key %q names run %s, which this runtime does not hold (%v): it must not run again", ErrRequestKeyUsed, key, runID, err)
	case m.Status.Final():
		return fmt.Errorf("%w: request key %q names run %s, which was released (status %s): its claim has ended and must not run again", ErrRequestKeyUsed, key, runID, m.Status)
	case m.ServedBy.Runtime != nil && m.ServedBy.Runtime.Address != "" && r.o.address != "" && m.ServedBy.Runtime.Address != r.o.address:
		return &heldElsewhere{key: key, run: runID, addr: m.ServedBy.Runtime.Address}
	default:
		return fmt.Errorf("%w: request key %q names run %s (status %s), which this runtime does not hold: it must not run again", ErrRequestKeyUsed, key, runID, m.Status)
	}
}

// heldElsewhere is keyUsed's answer when the key's claim is open and
// another replica, at addr, says it holds it: the Server passes the claim
// on to it (which answers the claim's grant again, adopted), once; where
// nothing passes it on, it is the refusal ErrRequestKeyUsed.
type heldElsewhere struct{ key, run, addr string }

func (e *heldElsewhere) Error() string {
	return fmt.Sprintf("%v: request key %q names run %s, open on the runtime replica at %s, not this one", ErrRequestKeyUsed, e.key, e.run, e.addr)
}

func (e *heldElsewhere) Unwrap() error { return ErrRequestKeyUsed }

// forgetKey drops the request key of claim c, which has ended; r.mu must be
// held.
func (r *Runtime) forgetKey(c *claim) {
	if k := r.keys[c.requestKey]; c.requestKey != "" && k != nil && k.c == c {
		delete(r.keys, c.requestKey)
	}
}
