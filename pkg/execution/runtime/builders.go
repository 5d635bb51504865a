package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// readBuilders records who built an artifact: its SLSA provenance
// attestations whose signatures verify with a key the policy trusts for
// that kind of artifact (policy.Attestations: the trust generation
// verification uses, checked when the runtime loads a revision pinning
// the artifact), each parsed by attest.ProvenanceOf (the parser of the
// policy's builderID check), their runDetails.builder.id recorded with the
// attestation's digest. An artifact with no such attestation is recorded
// with none, so "no provenance" is read back, never assumed.
func (p *packages) readBuilders(ctx context.Context, pol *policy.Policy, image string, k generation.Kind, id string, opts []policy.Option) (string, error) {
	atts, err := pol.Attestations(ctx, policy.Target{Ref: image, Kind: k.ArtifactKind()}, []string{attest.PredicateSLSAProvenanceV1}, opts...)
	if err != nil {
		return "", err
	}
	var bs []runmanifest.Builder
	var left []string
	for _, a := range atts {
		prov, err := attest.ProvenanceOf(a.Statement)
		if err != nil {
			left = append(left, fmt.Sprintf("attestation %s: %v", a.Digest, err))
			continue
		}
		b := runmanifest.Builder{ID: prov.GetRunDetails().GetBuilder().GetId(), Attestation: a.Digest.String()}
		if err := b.Validate(); err != nil {
			left = append(left, fmt.Sprintf("attestation %s: %v", a.Digest, err))
			continue
		}
		bs = append(bs, b)
	}
	if _, err := p.index.RecordBuilders(ctx, id, bs); err != nil {
		if errors.Is(err, runs.ErrInvalid) {
			return fmt.Sprintf("provenance of %s: %v", id, err), nil
		}
		return "", err
	}
	var out string
	switch bs = runmanifest.SortBuilders(bs); {
	case len(bs) == 0:
		out = fmt.Sprintf("no SLSA provenance of %s by a key policy %s trusts", id, pol.Metadata.Name)
	default:
		ids := make([]string, len(bs))
		for i, b := range bs {
			ids[i] = b.ID + " (" + b.Attestation + ")"
		}
		out = "built by " + strings.Join(ids, ", ")
	}
	if len(left) > 0 {
		out += fmt.Sprintf(" (%d provenance attestations left out: %s)", len(left), strings.Join(left, "; "))
	}
	return out, nil
}
