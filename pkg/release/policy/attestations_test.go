package policy_test

import (
	"context"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// TestAttestations: a consumer reads the SBOM of a template under the
// policy's trust: attestations by a trusted key are returned even where
// the rule does not require that type; a rogue key's are not; a tag is
// refused.
func TestAttestations(t *testing.T) {
	f := newFixture(t)
	// The rule requires a signature only: no SBOM is required.
	p := f.policy(`  rules:
    - name: templates
      match:
        kinds: [workspace-template]
      signatures:
        keys: [release]
`, false)
	ctx := context.Background()
	sbomTypes := []string{attest.PredicateSPDX, attest.PredicateCycloneDX}

	good := f.push("templates/good")
	f.publish(good, f.release, builder, buildType, true)
	got, err := p.Attestations(ctx, policy.Target{Ref: good.String(), Kind: "workspace-template"}, sbomTypes)
	if err != nil || len(got) != 1 || got[0].PredicateType != attest.PredicateSPDX {
		t.Fatalf("trusted SBOM: %+v, %v", got, err)
	}

	rogue := f.push("templates/rogue")
	f.publish(rogue, f.rogue, builder, buildType, true)
	if got, err := p.Attestations(ctx, policy.Target{Ref: rogue.String(), Kind: "workspace-template"}, sbomTypes); err != nil || len(got) != 0 {
		t.Errorf("rogue key's SBOM: %+v, %v, want none", got, err)
	}
	// Another kind: no rule covers it, so no key is trusted for it.
	if got, err := p.Attestations(ctx, policy.Target{Ref: good.String(), Kind: "runner"}, sbomTypes); err != nil || len(got) != 0 {
		t.Errorf("uncovered kind: %+v, %v, want none", got, err)
	}
	if _, err := p.Attestations(ctx, policy.Target{Ref: f.host + "/templates/good:latest", Kind: "workspace-template"}, sbomTypes); err == nil {
		t.Error("a tag was read")
	}
}
