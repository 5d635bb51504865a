package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// ErrRefused marks a generation whose image pins the policy refused; the
// message names each refused pin with its failed checks.
var ErrRefused = errors.New("refused by the verification policy")

// VerifyGeneration checks every image pin of g against the policy (each as
// the artifact kind of its pin) and returns the record a generation keeps
// of it, stamped now. Any refusal is an error wrapping ErrRefused naming
// every refused pin; an error without it means verification could not
// run.
func (p *Policy) VerifyGeneration(ctx context.Context, g *generation.Generation, now time.Time, opts ...Option) (*generation.Verification, error) {
	rec := &generation.Verification{
		Policy:     generation.PolicyRecord{Name: p.Metadata.Name, Digest: p.Digest},
		VerifiedAt: now.UTC().Truncate(time.Second),
	}
	var refusals []string
	for _, k := range generation.Kinds() {
		pin, ok := g.Pins[k]
		if !ok || pin.Form() != generation.FormImage {
			continue
		}
		res, err := p.Verify(ctx, Target{Ref: pin.Image, Kind: k.ArtifactKind()}, opts...)
		if err != nil {
			return nil, fmt.Errorf("policy: verify %s %s: %w", k, pin.Image, err)
		}
		if !res.Verified {
			var failed []string
			for _, c := range res.Failed() {
				name := c.Name
				if c.Rule != "" {
					name = c.Rule + "/" + c.Name
				}
				failed = append(failed, name+": "+c.Reason)
			}
			refusals = append(refusals, fmt.Sprintf("%s %s:\n    %s", k, pin.Image, strings.Join(failed, "\n    ")))
			continue
		}
		a := generation.VerifiedArtifact{Kind: k, Digest: res.Digest, Signatures: res.Signatures}
		for _, e := range res.Attestations {
			a.Attestations = append(a.Attestations, generation.AttestationRecord{PredicateType: e.PredicateType, Digest: e.Digest})
		}
		rec.Artifacts = append(rec.Artifacts, a)
	}
	if len(refusals) > 0 {
		return nil, fmt.Errorf("%w (policy %s):\n  %s", ErrRefused, p.Metadata.Name, strings.Join(refusals, "\n  "))
	}
	return rec, nil
}
