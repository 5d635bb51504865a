package strictyaml_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/strictyaml"
)

type doc struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Rules []struct {
			Name string   `yaml:"name"`
			Keys []string `yaml:"keys"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

const good = `kind: X
spec:
  rules:
    - name: a
      keys: [k1]
    - name: b

      keys:
        - k2
`

func TestDecodeAndLine(t *testing.T) {
	var d doc
	m, err := strictyaml.Decode([]byte(good), &d)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Rules) != 2 || d.Spec.Rules[1].Keys[0] != "k2" {
		t.Fatalf("decoded %+v", d)
	}
	for path, want := range map[string]int{
		"":                    1,
		"kind":                1,
		"spec.rules":          4,
		"spec.rules[1]":       6,
		"spec.rules[1].keys":  9,
		"spec.rules[1].nope":  6, // absent: nearest ancestor
		"spec.rules[7].name":  4, // index out of range: the sequence
		"spec.rules[x]":       3, // malformed index: the nearest found (spec)
		"spec.rules[0].name":  4,
		"spec.rules[0].keys":  5,
		"spec.missing.deeper": 3, // spec's mapping starts on line 3
	} {
		if got := m.Line(path); got != want {
			t.Errorf("Line(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestDecodeRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		line int
		msg  string
	}{
		"unknown field":   {"kind: X\nspec:\n  rulez: []\n", 3, "field rulez not found"},
		"second document": {"kind: X\n---\nkind: Y\n", 2, "one document per file"},
		"bad syntax":      {"kind: X\nspec: [\n", 2, ""},
		"wrong type":      {"kind: X\nspec:\n  rules: 5\n", 3, "cannot unmarshal"},
	} {
		t.Run(name, func(t *testing.T) {
			var d doc
			_, err := strictyaml.Decode([]byte(tc.in), &d)
			var e *strictyaml.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Line != tc.line {
				t.Errorf("line = %d, want %d (%v)", e.Line, tc.line, err)
			}
			if tc.msg != "" && !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("msg = %q, want %q", e.Msg, tc.msg)
			}
		})
	}
	var m *strictyaml.Doc
	if m.Line("a") != 0 {
		t.Error("nil Doc Line != 0")
	}
}
