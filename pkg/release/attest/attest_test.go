package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func hexOf(c byte) string { return strings.Repeat(string(c), 64) }

func fixedBuild() TemplateBuild {
	return TemplateBuild{
		Name:         "python-dev",
		TemplateID:   "sha256:" + hexOf('a'),
		Ref:          "registry.example/templates/python-dev@sha256:" + hexOf('a'),
		SpecDigest:   "sha256:" + hexOf('b'),
		SpecSource:   "templates/python-dev/template.yaml",
		BaseRef:      "registry.example/base/debian@sha256:" + hexOf('c'),
		BaseDigest:   "sha256:" + hexOf('c'),
		Inputs:       []Input{{Path: "tools/setup.sh", Digest: "sha256:" + hexOf('d')}, {Path: "etc/pip.conf", Digest: "sha256:" + hexOf('e')}},
		BuilderID:    "https://slipway.dev/builders/local@v1",
		InvocationID: "build-42",
		Started:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Finished:     time.Date(2026, 1, 2, 3, 6, 7, 500_000_000, time.UTC),
		Epoch:        1700000000,
	}
}

func mustMarshal(t *testing.T, b TemplateBuild) []byte {
	t.Helper()
	st, err := Provenance(b)
	if err != nil {
		t.Fatalf("Provenance: %v", err)
	}
	out, err := Marshal(st)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return out
}

func TestProvenanceRoundTrip(t *testing.T) {
	st, err := Provenance(fixedBuild())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !proto.Equal(st, got) {
		t.Fatalf("round trip differs:\nwant %v\ngot  %v", st, got)
	}
	p, err := ProvenanceOf(got)
	if err != nil {
		t.Fatalf("ProvenanceOf: %v", err)
	}
	if p.GetRunDetails().GetBuilder().GetId() != fixedBuild().BuilderID {
		t.Errorf("builder id = %q", p.GetRunDetails().GetBuilder().GetId())
	}
	if p.GetBuildDefinition().GetBuildType() != BuildTypeTemplate {
		t.Errorf("buildType = %q", p.GetBuildDefinition().GetBuildType())
	}
	deps := p.GetBuildDefinition().GetResolvedDependencies()
	if len(deps) != 3 || deps[0].GetUri() != "oci://"+fixedBuild().BaseRef || deps[1].GetName() != "etc/pip.conf" || deps[2].GetName() != "tools/setup.sh" {
		t.Errorf("resolvedDependencies = %v", deps)
	}
	if got := p.GetRunDetails().GetMetadata().GetFinishedOn().AsTime(); !got.Equal(fixedBuild().Finished) {
		t.Errorf("finishedOn = %v", got)
	}
	if st.GetSubject()[0].GetDigest()["sha256"] != hexOf('a') {
		t.Errorf("subject digest = %v", st.GetSubject()[0].GetDigest())
	}
}

// collectKeys gathers every object key in a JSON document.
func collectKeys(v any, keys map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			keys[k] = true
			collectKeys(e, keys)
		}
	case []any:
		for _, e := range x {
			collectKeys(e, keys)
		}
	}
}

// TestJSONNamesNotProtoNames is the protojson trap: encoding/json of the
// generated types writes predicate_type; Marshal must not.
func TestJSONNamesNotProtoNames(t *testing.T) {
	out := mustMarshal(t, fixedBuild())
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["_type"] != "https://in-toto.io/Statement/v1" {
		t.Errorf("_type = %v", doc["_type"])
	}
	if doc["predicateType"] != "https://slsa.dev/provenance/v1" {
		t.Errorf("predicateType = %v", doc["predicateType"])
	}
	keys := map[string]bool{}
	collectKeys(doc, keys)
	for _, k := range []string{"_type", "predicateType", "subject", "buildDefinition", "buildType", "externalParameters", "internalParameters", "resolvedDependencies", "runDetails", "builder", "invocationId", "startedOn", "finishedOn", "sourceDateEpoch", "specDigest"} {
		if !keys[k] {
			t.Errorf("key %q missing from %s", k, out)
		}
	}
	for k := range keys {
		if strings.Contains(k, "_") && k != "_type" {
			t.Errorf("snake_case key %q in %s", k, out)
		}
	}

	// What the trap looks like, and that Parse refuses it.
	st, _ := Provenance(fixedBuild())
	wrong, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wrong, []byte(`"predicate_type"`)) {
		t.Fatalf("expected encoding/json to show the trap, got %s", wrong)
	}
	if _, err := Parse(wrong); !errors.Is(err, ErrValidation) || !strings.Contains(err.Error(), "predicate_type") {
		t.Errorf("Parse(encoding/json output) = %v, want a refusal naming predicate_type", err)
	}
}

func TestDeterministic(t *testing.T) {
	a := mustMarshal(t, fixedBuild())
	st, _ := Provenance(fixedBuild())
	first, _ := Marshal(st)
	second, _ := Marshal(st)
	if !bytes.Equal(first, second) {
		t.Fatal("marshalling one statement twice differs")
	}
	// Equal inputs in another order, and times in another zone, give the same bytes.
	b := fixedBuild()
	b.Inputs[0], b.Inputs[1] = b.Inputs[1], b.Inputs[0]
	b.Started = b.Started.In(time.FixedZone("x", 3600))
	if got := mustMarshal(t, b); !bytes.Equal(a, got) {
		t.Fatalf("equal builds differ:\n%s\n%s", a, got)
	}
	if !json.Valid(a) || bytes.ContainsAny(a, "\n\t") {
		t.Errorf("not compact JSON: %s", a)
	}
}

func TestGolden(t *testing.T) {
	got := mustMarshal(t, fixedBuild())
	path := filepath.Join("testdata", "provenance.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(bytes.TrimSuffix(want, []byte("\n")), got) {
		t.Fatalf("golden %s differs:\nwant %s\ngot  %s", path, want, got)
	}
	if _, err := Parse(want); err != nil {
		t.Fatalf("golden does not parse: %v", err)
	}
}

func TestProvenanceRefusals(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*TemplateBuild)
		field string
	}{
		{"no builder id", func(b *TemplateBuild) { b.BuilderID = "" }, "BuilderID"},
		{"no name", func(b *TemplateBuild) { b.Name = "" }, "Name"},
		{"bad template id", func(b *TemplateBuild) { b.TemplateID = "sha256:abc" }, "TemplateID"},
		{"upper-case hex", func(b *TemplateBuild) { b.TemplateID = "sha256:" + hexOf('A') }, "TemplateID"},
		{"wrong algorithm", func(b *TemplateBuild) { b.SpecDigest = "sha512:" + hexOf('b') }, "SpecDigest"},
		{"missing spec digest", func(b *TemplateBuild) { b.SpecDigest = "" }, "SpecDigest"},
		{"bad base digest", func(b *TemplateBuild) { b.BaseDigest = "latest" }, "BaseDigest"},
		{"base digest without ref", func(b *TemplateBuild) { b.BaseRef = "" }, "BaseRef"},
		{"bad input digest", func(b *TemplateBuild) { b.Inputs[1].Digest = "sha256:zz" }, `Inputs["etc/pip.conf"].Digest`},
		{"duplicate input", func(b *TemplateBuild) { b.Inputs[1].Path = b.Inputs[0].Path }, "Inputs"},
		{"input without path", func(b *TemplateBuild) { b.Inputs[0].Path = "" }, "Inputs"},
		{"negative epoch", func(b *TemplateBuild) { b.Epoch = -1 }, "Epoch"},
		{"finished before started", func(b *TemplateBuild) { b.Finished = b.Started.Add(-time.Second) }, "Finished"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fixedBuild()
			tc.edit(&b)
			_, err := Provenance(b)
			if !errors.Is(err, ErrValidation) {
				t.Fatalf("err = %v, want ErrValidation", err)
			}
			if !strings.Contains(err.Error(), "TemplateBuild."+tc.field) {
				t.Errorf("err %q does not name TemplateBuild.%s", err, tc.field)
			}
			if err.Error() != strings.ToLower(err.Error()[:1])+err.Error()[1:] {
				t.Errorf("error not lower-case: %q", err)
			}
		})
	}
}

func TestFromScratch(t *testing.T) {
	b := fixedBuild()
	b.BaseRef, b.BaseDigest, b.Ref, b.Inputs = "", "", "", nil
	st, err := Provenance(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetSubject()[0].GetName() != "python-dev" {
		t.Errorf("subject name = %q, want the template name", st.GetSubject()[0].GetName())
	}
	p, err := ProvenanceOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.GetBuildDefinition().GetResolvedDependencies()); n != 0 {
		t.Errorf("%d dependencies, want 0", n)
	}
}
