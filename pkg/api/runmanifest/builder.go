package runmanifest

import (
	"cmp"
	"fmt"
	"slices"
)

// Builder is a builder an artifact's verified SLSA provenance names: the
// provenance's runDetails.builder.id, and the digest of the attestation it
// was read from. A runtime records the builders of each artifact a run is
// made of beside its packages.
type Builder struct {
	ID          string `json:"id"`
	Attestation string `json:"attestation"`
}

// Validate checks b as a store records it: an id and an attestation
// digest, each without white space or control characters, at most 512
// bytes. Errors wrap ErrInvalid.
func (b Builder) Validate() error {
	if b.ID == "" || b.Attestation == "" {
		return fmt.Errorf("%w: builder %q (attestation %q): id and attestation are required", ErrInvalid, SafeID(b.ID), SafeID(b.Attestation))
	}
	for _, f := range []struct{ name, v string }{{"id", b.ID}, {"attestation", b.Attestation}} {
		if err := CheckID(f.v); err != nil {
			return fmt.Errorf("%w: builder %s %q: %s", ErrInvalid, f.name, SafeID(f.v), err)
		}
	}
	return nil
}

// SortBuilders sorts bs by id, then attestation, and drops repeats.
func SortBuilders(bs []Builder) []Builder {
	slices.SortFunc(bs, func(a, b Builder) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Attestation, b.Attestation))
	})
	return slices.Compact(bs)
}
