package release

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/uuid"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sbom"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

// Signing says how a published template is signed and attested.
type Signing struct {
	// Signer is the key (file or KMS) that signs and attests.
	Signer signature.SignerVerifier
	// BuilderID is the provenance's runDetails.builder.id: who built it,
	// as the verification policy will require it. Required.
	BuilderID string
	// SpecSource is where the spec came from (recorded in the provenance).
	SpecSource string
	// Options for package sign; they must carry the transparency-log choice
	// (sign.WithOfflineNoTlog).
	Options []sign.Option
}

// SignResult reports what was signed and attached.
type SignResult struct {
	Ref          string            `json:"ref"`
	Signature    Attached          `json:"signature"`
	Attestations []Attached        `json:"attestations"`
	Tlog         string            `json:"tlog"`
	Provenance   ProvenanceSummary `json:"provenance"`
}

// Attached is one signature or attestation in the registry.
type Attached struct {
	PredicateType string `json:"predicateType,omitempty"`
	Tag           string `json:"tag"`
	Status        string `json:"status"`
}

// ProvenanceSummary names what the provenance says about the build.
type ProvenanceSummary struct {
	BuilderID    string `json:"builderID"`
	BuildType    string `json:"buildType"`
	InvocationID string `json:"invocationID"`
}

// SignTemplate signs the published template res (res.Ref must be a digest
// reference) and attaches its SLSA v1 provenance and its SBOMs (SPDX and
// CycloneDX) as attestations, with sign.SignAndAttest: the signature and
// the attestations go to different tags and are written concurrently; each
// is read back and verified by package sign before this returns.
func SignTemplate(ctx context.Context, res *template.Result, doc *sbom.SBOM, s Signing) (*SignResult, error) {
	if s.Signer == nil {
		return nil, fmt.Errorf("release: sign %s: no signer", res.Name)
	}
	if s.BuilderID == "" {
		return nil, fmt.Errorf("release: sign %s: no builder id (the provenance's runDetails.builder.id)", res.Name)
	}
	d, err := sign.ParseDigest(res.Ref)
	if err != nil {
		return nil, fmt.Errorf("release: sign %s: %w", res.Name, err)
	}
	statements, sum, err := templateStatements(res, doc, d, s)
	if err != nil {
		return nil, err
	}
	out := &SignResult{Ref: d.String(), Provenance: sum}
	sres, ares, err := sign.SignAndAttest(ctx, d, s.Signer, statements, s.Options...)
	if err != nil {
		return nil, fmt.Errorf("release: sign %s: %w", res.Name, err)
	}
	out.Signature = Attached{Tag: sres.SignatureTag.String(), Status: string(sres.Status)}
	out.Tlog = sres.Tlog
	for _, r := range ares {
		out.Attestations = append(out.Attestations, Attached{PredicateType: r.PredicateType, Tag: r.AttestationTag.String(), Status: string(r.Status)})
	}
	return out, nil
}

// templateStatements makes the provenance and SBOM statements about d.
func templateStatements(res *template.Result, doc *sbom.SBOM, d name.Digest, s Signing) ([][]byte, ProvenanceSummary, error) {
	inputs := make([]attest.Input, len(res.Inputs))
	for i, in := range res.Inputs {
		inputs[i] = attest.Input{Path: in.Path, Digest: in.Digest}
	}
	baseRef := res.Base.Name
	if res.Base.Tag != "" {
		baseRef += ":" + res.Base.Tag
	}
	inv := uuid.NewString()
	prov, err := attest.Provenance(attest.TemplateBuild{
		Name:         res.Name,
		TemplateID:   d.DigestStr(),
		Ref:          d.String(),
		SpecDigest:   res.SpecDigest,
		SpecSource:   s.SpecSource,
		BaseRef:      baseRef,
		BaseDigest:   res.BaseDigest,
		Inputs:       inputs,
		BuilderID:    s.BuilderID,
		InvocationID: inv,
		Started:      res.Started,
		Finished:     res.Finished,
		Epoch:        res.Epoch,
	})
	if err != nil {
		return nil, ProvenanceSummary{}, fmt.Errorf("release: provenance of %s: %w", res.Name, err)
	}
	b, err := attest.Marshal(prov)
	if err != nil {
		return nil, ProvenanceSummary{}, fmt.Errorf("release: provenance of %s: %w", res.Name, err)
	}
	out := [][]byte{b}
	if doc != nil {
		for _, f := range []struct {
			typ  string
			json []byte
		}{{attest.PredicateSPDX, doc.SPDXJSON()}, {attest.PredicateCycloneDX, doc.CycloneDXJSON()}} {
			st, err := attest.SBOM(d.Context().Name(), d.DigestStr(), f.typ, f.json)
			if err == nil {
				b, err = attest.Marshal(st)
			}
			if err != nil {
				return nil, ProvenanceSummary{}, fmt.Errorf("release: SBOM attestation (%s) of %s: %w", f.typ, res.Name, err)
			}
			out = append(out, b)
		}
	}
	return out, ProvenanceSummary{BuilderID: s.BuilderID, BuildType: attest.BuildTypeTemplate, InvocationID: inv}, nil
}
