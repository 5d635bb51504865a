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
		"unknown field":   {"kind: X\nspec:\n  rulez: []\n", 3, `unknown field "rulez" (did you mean "rules"?)`},
		"second document": {"kind: X\n---\nkind: Y\n", 2, "one document per file"},
		"bad syntax":      {"kind: X\nspec: [\n", 2, ""},
		"wrong type":      {"kind: X\nspec:\n  rules: 5\n", 3, "got a number, want a list"},
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

// Spec and Step have names as a package's types do: the messages must not
// show them.
type Spec struct {
	Base   string `yaml:"base"`
	Steps  []Step `yaml:"steps"`
	Inline `yaml:",inline"`
}

type Step struct {
	Run     string `yaml:"run"`
	Timeout int    `yaml:"timeout"`
}

type Inline struct {
	Network string `yaml:"network"`
}

type Template struct {
	Kind string `yaml:"kind"`
	Spec Spec   `yaml:"spec"`
}

// TestUnknownFieldSuggests: an unknown field is named with the nearest
// valid one, or the valid ones, and never a Go type.
func TestUnknownFieldSuggests(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"kind: X\nspec:\n  bsae: debian\n", `3: unknown field "bsae" (did you mean "base"?)`},
		{"kind: X\nspec:\n  netwrok: deny\n", `3: unknown field "netwrok" (did you mean "network"?)`},
		{"kind: X\nspec:\n  steps:\n    - run: make\n      timout: 5\n", `5: unknown field "timout" (did you mean "timeout"?)`},
		{"kind: X\nspec:\n  zzzzzz: 1\n", `3: unknown field "zzzzzz" (the fields here: base, network, steps)`},
		{"kind: X\nspec:\n  steps:\n    - run: make\n      timeout: soon\n", "5: got a string, want a number"},
		{"Kind: X\n", `1: unknown field "Kind" (did you mean "kind"?)`},
	} {
		var v Template
		_, err := strictyaml.Decode([]byte(c.in), &v)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %s", c.in, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "strictyaml_test.") || strings.Contains(err.Error(), "type ")) {
			t.Errorf("%q: a Go type in %v", c.in, err)
		}
	}
}

// TestSyntaxErrorLine: a syntax error names the line at fault, where
// yaml.v3 names the line before it or where the construct began.
func TestSyntaxErrorLine(t *testing.T) {
	const head = "kind: X\nspec:\n  base: debian\n  steps:\n"
	for _, c := range []struct {
		in   string
		line int
	}{
		{head + "- run: a\n", 5},                                 // parser: did not find expected key (yaml.v3 says 4)
		{head + "\t- run: a\n", 5},                               // a tab (yaml.v3 says 4)
		{head + "    - run: [a, b\n", 5},                         // an unclosed list (yaml.v3 says 4)
		{head + "    - run: a\n   oops: 1\n", 6},                 // yaml.v3 says 5
		{head + "    - run: a: b\n", 5},                          // mapping values are not allowed
		{"kind: X\nspec: {base: a,\n  steps: [a]\n  x: 1}\n", 3}, // the comma missing at the end of line 3
		{"a: 1\nb: 2\nc: 3\nd: 4\ne\n", 5},                       // could not find expected ':'
		{"a: 1\nb: 2\nc: 3\nd: 4\ne: \"abc\n", 5},                // unterminated quote
		{"a: 1\nb: 2\nc: 3\nd: 4\n- e\n", 5},                     // yaml.v3 says 4
	} {
		var v map[string]any
		_, err := strictyaml.Decode([]byte(c.in), &v)
		var e *strictyaml.Error
		if !errors.As(err, &e) || e.Line != c.line {
			t.Errorf("%q: %v, want line %d", c.in, err, c.line)
		}
	}
}
