package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Predicate types this package produces and recognises.
const (
	// PredicateSLSAProvenanceV1 is the SLSA provenance v1 predicate type.
	PredicateSLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// PredicateSPDX is the predicate type of an SPDX JSON document.
	PredicateSPDX = "https://spdx.dev/Document"
	// PredicateCycloneDX is the predicate type of a CycloneDX JSON BOM.
	PredicateCycloneDX = "https://cyclonedx.org/bom"

	// StatementType is the in-toto Statement v1 "_type".
	StatementType = intoto.StatementTypeUri
	// StatementTypeV01 is the older "_type" that the cosign CLI still
	// writes (even around SLSA v1 predicates). Its layout is the same as
	// v1's, so Parse accepts it and reads it as v1.
	StatementTypeV01 = "https://in-toto.io/Statement/v0.1"
)

// Errors. Every refusal of input wraps ErrValidation, so one errors.Is covers
// the family; the message names the field at fault.
var (
	// ErrValidation marks input that cannot become (or is not) a valid statement.
	ErrValidation = errors.New("attest: invalid input")
	// ErrPredicateType marks a predicate type that is not the one expected.
	ErrPredicateType = fmt.Errorf("%w: unexpected predicate type", ErrValidation)
)

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// digestHex checks that d is "sha256:" followed by 64 lower-case hex digits
// and returns the hex part; field names the input in the error.
func digestHex(field, d string) (string, error) {
	if d == "" {
		return "", fmt.Errorf("%w: %s: required", ErrValidation, field)
	}
	if !sha256Digest.MatchString(d) {
		return "", fmt.Errorf("%w: %s: %q is not sha256:<64 lower-case hex>", ErrValidation, field, d)
	}
	return d[len("sha256:"):], nil
}

// Marshal validates st and encodes it as deterministic, compact JSON with
// camelCase keys ("_type", "predicateType", …) and sorted object keys.
func Marshal(st *intoto.Statement) ([]byte, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: statement: nil", ErrValidation)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	raw, err := protojson.MarshalOptions{}.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("attest: encode statement: %w", err)
	}
	return canonical(raw)
}

// canonical re-encodes JSON compactly with sorted object keys, numbers
// exactly as written and no HTML escaping.
func canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("attest: canonicalise json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("attest: canonicalise json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// snakeKeys are proto field names that protojson would accept on input but
// that only a wrong (encoding/json) serialiser writes.
var snakeKeys = []string{"predicate_type", "type"}

// Parse decodes an in-toto Statement v1 written with JSON names and validates
// it. A v0.1 "_type" (what the cosign CLI writes) is read as v1: the two
// layouts are the same. Unknown fields are ignored, as the in-toto spec asks of consumers; a
// top-level "predicate_type" or "type" key (the signature of a statement
// serialised with encoding/json instead of protojson) is refused.
func Parse(b []byte) (*intoto.Statement, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	for _, k := range snakeKeys {
		if _, ok := top[k]; ok {
			return nil, fmt.Errorf("%w: statement: key %q is a proto field name, not the JSON name (serialised without protojson?)", ErrValidation, k)
		}
	}
	st := &intoto.Statement{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	if st.GetType() == StatementTypeV01 {
		st.Type = StatementType
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	return st, nil
}
