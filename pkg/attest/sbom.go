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
	if subjectName == "" {
		return nil, fmt.Errorf("%w: subjectName: required", ErrValidation)
	}
	h, err := digestHex("digest", digest)
	if err != nil {
		return nil, err
	}
	if predicateType != PredicateSPDX && predicateType != PredicateCycloneDX {
		return nil, fmt.Errorf("%w: predicateType: %q is not %q or %q", ErrPredicateType, predicateType, PredicateSPDX, PredicateCycloneDX)
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(doc, pred); err != nil {
		return nil, fmt.Errorf("%w: doc: not a JSON object: %w", ErrValidation, err)
	}
	f := pred.GetFields()
	switch predicateType {
	case PredicateSPDX:
		if f["spdxVersion"].GetStringValue() == "" {
			return nil, fmt.Errorf("%w: doc: predicateType %q but the document has no spdxVersion", ErrPredicateType, predicateType)
		}
	case PredicateCycloneDX:
		if f["bomFormat"].GetStringValue() != "CycloneDX" {
			return nil, fmt.Errorf("%w: doc: predicateType %q but the document's bomFormat is not \"CycloneDX\"", ErrPredicateType, predicateType)
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
	return st, nil
}
