package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/version"
)

// TestOutputYAML: -o yaml renders the value -o json renders.
func TestOutputYAML(t *testing.T) {
	j, y := run(t, "", "version", "-o", "json"), run(t, "", "version", "-o", "yaml")
	if j.code != 0 || y.code != 0 {
		t.Fatalf("json %+v yaml %+v", j, y)
	}
	var fromJSON, fromYAML version.Info
	if err := json.Unmarshal([]byte(j.stdout), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(y.stdout), &fromYAML); err != nil || fromYAML != fromJSON || strings.HasPrefix(y.stdout, "{") {
		t.Fatalf("yaml %q (%v) is not json's %+v", y.stdout, err, fromJSON)
	}
	// A stream of values is a stream of documents.
	g := &globals{output: outputYAML, stdout: &strings.Builder{}}
	_ = g.printJSON(map[string]int{"a": 1})
	_ = g.printJSON(map[string]int{"b": 2})
	if got := g.stdout.(*strings.Builder).String(); got != "a: 1\n---\nb: 2\n" {
		t.Fatalf("stream %q", got)
	}
}

// TestJSONErrors: under -o json an error is one JSON object on stderr.
func TestJSONErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-o", "json", "rollout", "stauts"},
		{"rollout", "stauts", "--output=json"},
		{"version", "--no-such-flag", "-ojson"},
		{"runs", "show", "-o", "json"},
	} {
		r := run(t, "", args...)
		var e struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}
		if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || json.Unmarshal([]byte(r.stderr), &e) != nil || e.Code != exitUsage || e.Error == "" {
			t.Errorf("%v: code %d stderr %q; want one JSON object with code 2", args, r.code, r.stderr)
		}
	}
	if r := run(t, "", "rollout", "stauts"); !strings.HasPrefix(r.stderr, "slipway: unknown command") {
		t.Errorf("text error: %q", r.stderr)
	}
}

func TestOutputFromArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"a", "-o", "json"}, "json"},
		{[]string{"-ojson"}, "json"},
		{[]string{"-o=yaml"}, "yaml"},
		{[]string{"--output", "json", "--output=yaml"}, "yaml"},
		{[]string{"job", "submit", "--", "cmd", "-o", "json"}, ""},
		{[]string{"--other", "x"}, ""},
	} {
		if got := outputFromArgs(c.args); got != c.want {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestOutFileRename: generation create's file is --out-file; --output FILE
// still names it for one release, with a warning; --output is otherwise the
// format there as everywhere.
func TestOutFileRename(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "generation", "create", "--pool", "agents", "--output", "g1.yaml")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--output FILE has been deprecated, use --out-file FILE") || strings.Contains(r.stderr, "--out-file are required") {
		t.Errorf("deprecated --output FILE: %+v", r)
	}
	r = run(t, dir, "generation", "create", "--pool", "agents", "--out-file", "g1.yaml")
	if r.code != exitUsage || strings.Contains(r.stderr, "deprecated") || strings.Contains(r.stderr, "--out-file are required") {
		t.Errorf("--out-file: %+v", r)
	}
	r = run(t, dir, "generation", "create", "--pool", "agents", "-o", "json")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--out-file are required") {
		t.Errorf("-o json without --out-file: %+v", r)
	}
}
