package policy

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Attestations returns the attestations of target (a digest reference)
// whose predicate type is one of predicateTypes and that verify with a key
// the policy trusts for it: any key named by a rule covering the target
// (its signature keys and its attestations' keys), whether or not the rule
// requires that predicate type. This is how a consumer reads an
// attestation it wants for itself (the runtime reads a template's SBOM to
// index its packages) under the same trust as verification. A target no
// rule covers, or covered only by allowUnverified rules, has none.
func (p *Policy) Attestations(ctx context.Context, t Target, predicateTypes []string, opts ...Option) ([]sign.VerifiedAttestation, error) {
	o := &verifyOptions{}
	for _, opt := range opts {
		opt(o)
	}
	r, err := ref.Parse(t.Ref)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if r.Digest() == "" {
		return nil, fmt.Errorf("policy: %s is not pinned by digest", t.Ref)
	}
	d, err := name.NewDigest(r.Name() + "@" + r.Digest())
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", t.Ref, err)
	}
	var keys []string
	for _, rl := range p.matching(r.Name(), t.Kind) {
		if rl.Signatures != nil {
			keys = append(keys, rl.Signatures.Keys...)
		}
		for _, a := range rl.Attestations {
			keys = append(keys, a.Keys...)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		return nil, nil
	}
	session, err := sign.NewSession(o.sign...)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	sopts := append([]sign.Option{sign.WithSession(session)}, o.sign...)
	sopts = append(sopts, sign.WithOfflineNoTlog())
	var out []sign.VerifiedAttestation
	seen := map[string]bool{}
	for _, k := range keys {
		got, err := sign.VerifyAttestations(ctx, d, p.verifiers[k], sopts...)
		if isRefusal(err) {
			continue // none by this key
		}
		if err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		for _, a := range got.Attestations {
			if slices.Contains(predicateTypes, a.PredicateType) && !seen[a.Digest.String()] {
				seen[a.Digest.String()] = true
				out = append(out, a)
			}
		}
	}
	return out, nil
}
