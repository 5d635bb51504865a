package generation

import (
	"fmt"
	"math"
)

// New makes the next generation of pool from the generation from (nil for
// the pool's first): from's pins with those in pins put over them (a zero
// Pin removes its kind), and compat, or from's compatibility when compat is
// nil. Image references are written in canonical form and commits in lower
// case. Sequence is from's plus 1, or 1.
//
// New refuses a from of another pool, a from that does not validate, and a
// result that does not validate (a tag, an unknown kind, …). When the
// content is from's own it returns an error wrapping ErrUnchanged: the same
// content is the same generation. The caller sets Verification.
func New(pool string, from *Generation, pins map[Kind]Pin, compat *Compatibility) (*Generation, error) {
	g := &Generation{APIVersion: APIVersion, Kind: DocumentKind, Pool: pool, Sequence: 1, Pins: Pins{}}
	if from != nil {
		if from.Pool != pool {
			return nil, fmt.Errorf("%w: from %s is a generation of pool %q, not %q", ErrInvalid, from.ID, from.Pool, pool)
		}
		if err := from.validate(true); err != nil {
			return nil, fmt.Errorf("from: %w", err)
		}
		if from.Sequence == math.MaxInt64 {
			return nil, fmt.Errorf("%w: from %s has the last sequence number", ErrInvalid, from.ID)
		}
		g.Sequence = from.Sequence + 1
		for k, p := range from.Pins {
			g.Pins[k] = p.clone()
		}
		g.Compatibility = from.Compatibility
	}
	for k, p := range pins {
		if p.IsZero() {
			delete(g.Pins, k)
			continue
		}
		g.Pins[k] = p.normalize()
	}
	switch {
	case compat != nil:
		g.Compatibility = *compat
	case from == nil:
		return nil, fmt.Errorf("generation: compatibility: %w: required for a pool's first generation", ErrInvalid)
	}
	if err := g.validate(false); err != nil {
		return nil, err
	}
	id, err := ComputeID(g)
	if err != nil {
		return nil, err
	}
	g.ID = id
	if from != nil && from.ID == id {
		return nil, fmt.Errorf("%w: the pins and compatibility are those of %s (sequence %d)", ErrUnchanged, from.ID, from.Sequence)
	}
	return g, nil
}
