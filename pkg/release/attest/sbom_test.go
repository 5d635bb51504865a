package attest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

const spdxDoc = `{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","name":"python-dev","packages":[{"name":"openssl","versionInfo":"3.0.7"}]}`
const cdxDoc = `{"bomFormat":"CycloneDX","specVersion":"1.6","components":[{"name":"openssl","version":"3.0.7"}]}`

func TestSBOM(t *testing.T) {
	for _, tc := range []struct{ typ, doc string }{{PredicateSPDX, spdxDoc}, {PredicateCycloneDX, cdxDoc}} {
		st, err := SBOM("registry.example/t", "sha256:"+hexOf('a'), tc.typ, []byte(tc.doc))
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		out, err := Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatal(err)
		}
		if string(doc["predicateType"]) != `"`+tc.typ+`"` {
			t.Errorf("predicateType = %s", doc["predicateType"])
		}
		var pred, want any
		_ = json.Unmarshal(doc["predicate"], &pred)
		_ = json.Unmarshal([]byte(tc.doc), &want)
		if a, b := mustJSON(pred), mustJSON(want); a != b {
			t.Errorf("predicate is not the document:\n%s\n%s", a, b)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(st, back) {
			t.Errorf("round trip differs")
		}
		if _, err := ProvenanceOf(back); !errors.Is(err, ErrPredicateType) {
			t.Errorf("ProvenanceOf(SBOM) = %v, want ErrPredicateType", err)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSBOMRefusals(t *testing.T) {
	good := "sha256:" + hexOf('a')
	tests := []struct {
		name, subject, digest, typ, doc, field string
		sentinel                               error
	}{
		{"wrong predicate type", "r", good, PredicateSLSAProvenanceV1, spdxDoc, "predicateType", ErrPredicateType},
		{"empty predicate type", "r", good, "", spdxDoc, "predicateType", ErrPredicateType},
		{"spdx type with cyclonedx doc", "r", good, PredicateSPDX, cdxDoc, "spdxVersion", ErrPredicateType},
		{"cyclonedx type with spdx doc", "r", good, PredicateCycloneDX, spdxDoc, "bomFormat", ErrPredicateType},
		{"bad digest", "r", "sha256:1234", PredicateSPDX, spdxDoc, "digest", ErrValidation},
		{"no subject", "", good, PredicateSPDX, spdxDoc, "subjectName", ErrValidation},
		{"not an object", "r", good, PredicateSPDX, `[1,2]`, "predicate", ErrValidation},
		{"not json", "r", good, PredicateSPDX, `spdx`, "predicate", ErrValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SBOM(tc.subject, tc.digest, tc.typ, []byte(tc.doc))
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, ErrValidation) {
				t.Fatalf("err = %v, want %v", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       `{`,
		"wrong type":     `{"_type":"https://in-toto.io/Statement/v0.2","subject":[{"name":"x","digest":{"sha256":"` + hexOf('a') + `"}}],"predicateType":"p","predicate":{}}`,
		"no subject":     `{"_type":"https://in-toto.io/Statement/v1","predicateType":"p","predicate":{}}`,
		"short digest":   `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"abc"}}],"predicateType":"p","predicate":{}}`,
		"no predicate":   `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` + hexOf('a') + `"}}],"predicateType":"p"}`,
		"snake_case key": `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` + hexOf('a') + `"}}],"predicate_type":"p","predicate":{}}`,
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrValidation) {
			t.Errorf("%s: err = %v, want ErrValidation", name, err)
		}
	}
	if _, err := Marshal(nil); !errors.Is(err, ErrValidation) {
		t.Errorf("Marshal(nil) = %v", err)
	}
}

func TestNew(t *testing.T) {
	good := "sha256:" + strings.Repeat("a", 64)
	st, err := New("r", good, "https://example.com/vuln-scan/v1", []byte(`{"scanner":"x","results":[]}`))
	if err != nil || st.GetPredicateType() != "https://example.com/vuln-scan/v1" || st.GetPredicate().GetFields()["scanner"].GetStringValue() != "x" {
		t.Fatalf("New(custom) = %v, %v", st, err)
	}
	// A predicate claiming to be SLSA provenance must be one.
	if _, err := New("r", good, PredicateSLSAProvenanceV1, []byte(`{"builder":"x"}`)); !errors.Is(err, ErrValidation) {
		t.Errorf("New(bad provenance) err = %v, want ErrValidation", err)
	}
	if _, err := New("r", good, "", []byte(`{}`)); !errors.Is(err, ErrValidation) || !strings.Contains(err.Error(), "predicateType") {
		t.Errorf("New(no type) err = %v", err)
	}
}

// TestParseV01 reads a statement with the v0.1 "_type" the cosign CLI
// writes, as v1.
func TestParseV01(t *testing.T) {
	st, err := Parse([]byte(`{"_type":"https://in-toto.io/Statement/v0.1","subject":[{"name":"x","digest":{"sha256":"` + hexOf('a') + `"}}],"predicateType":"p","predicate":{"k":1}}`))
	if err != nil || st.GetType() != StatementType || st.GetPredicateType() != "p" {
		t.Fatalf("Parse(v0.1) = %v, %v", st, err)
	}
}
