package attest

import (
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// SBOM builds an in-toto Statement v1 whose subject is the image subjectName
// at digest (sha256:<hex>) and whose predicate is the SBOM JSON document doc.
// predicateType must be PredicateSPDX or PredicateCycloneDX, and doc must look
// like that format (an SPDX document has "spdxVersion"; a CycloneDX BOM has
// "bomFormat": "CycloneDX"). The document is carried as a JSON object, so
// numbers beyond 2^53 lose precision, as with any in-toto predicate.
func SBOM(subjectName, digest, predicateType string, doc []byte) (*intoto.Statement, error) {
	if predicateType != PredicateSPDX && predicateType != PredicateCycloneDX {
		return nil, fmt.Errorf("%w: predicateType: %q is not %q or %q", ErrPredicateType, predicateType, PredicateSPDX, PredicateCycloneDX)
	}
	return New(subjectName, digest, predicateType, doc)
}

// New builds an in-toto Statement v1 about the image subjectName at digest
// (sha256:<hex>) with the JSON object predicate. A predicate of a type this
// package knows is checked: SLSA provenance v1 must validate as such, an SPDX
// document must have "spdxVersion", a CycloneDX BOM "bomFormat": "CycloneDX".
// Other predicate types are carried as they are.
func New(subjectName, digest, predicateType string, predicate []byte) (*intoto.Statement, error) {
	if subjectName == "" {
		return nil, fmt.Errorf("%w: subjectName: required", ErrValidation)
	}
	h, err := digestHex("digest", digest)
	if err != nil {
		return nil, err
	}
	if predicateType == "" {
		return nil, fmt.Errorf("%w: predicateType: required", ErrValidation)
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(predicate, pred); err != nil {
		return nil, fmt.Errorf("%w: predicate: not a JSON object: %w", ErrValidation, err)
	}
	f := pred.GetFields()
	switch predicateType {
	case PredicateSPDX:
		if f["spdxVersion"].GetStringValue() == "" {
			return nil, fmt.Errorf("%w: predicate: predicateType %q but the document has no spdxVersion", ErrPredicateType, predicateType)
		}
	case PredicateCycloneDX:
		if f["bomFormat"].GetStringValue() != "CycloneDX" {
			return nil, fmt.Errorf("%w: predicate: predicateType %q but the document's bomFormat is not \"CycloneDX\"", ErrPredicateType, predicateType)
		}
	}
	st := &intoto.Statement{
		Type:          StatementType,
		Subject:       []*intoto.ResourceDescriptor{{Name: subjectName, Digest: map[string]string{"sha256": h}}},
		PredicateType: predicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	if predicateType == PredicateSLSAProvenanceV1 {
		if _, err := ProvenanceOf(st); err != nil {
			return nil, err
		}
	}
	return st, nil
}
