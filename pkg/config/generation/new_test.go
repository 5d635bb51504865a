package generation_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

var compat34 = &generation.Compatibility{
	ControlPlaneProtocol: generation.Range{Min: 3, Max: 4},
	RunnerProtocol:       generation.Range{Min: 2, Max: 2},
}

func TestNewFirst(t *testing.T) {
	git := &generation.GitPin{Repo: "https://git.example/p.git", Commit: strings.Repeat("AB", 20)}
	g, err := generation.New("agents", nil, map[generation.Kind]generation.Pin{
		generation.Runner: {Image: "nginx:1.25@" + d1},
		generation.Policy: {Git: git},
	}, compat34)
	if err != nil {
		t.Fatal(err)
	}
	if g.Sequence != 1 || g.Pool != "agents" || g.APIVersion != generation.APIVersion || g.Kind != generation.DocumentKind {
		t.Errorf("New = %+v", g)
	}
	// One spelling: canonical reference, lower-case commit.
	if got := g.Pins[generation.Runner].Image; got != "index.docker.io/library/nginx:1.25@"+d1 {
		t.Errorf("runner image = %s", got)
	}
	if got := g.Pins[generation.Policy].Git.Commit; got != strings.Repeat("ab", 20) {
		t.Errorf("commit = %s", got)
	}
	// The caller's GitPin is neither changed nor shared.
	if git.Commit != strings.Repeat("AB", 20) {
		t.Errorf("New changed the caller's pin: %s", git.Commit)
	}
	git.Repo = "elsewhere"
	if g.Pins[generation.Policy].Git.Repo != "https://git.example/p.git" {
		t.Error("New shares the caller's GitPin")
	}
	if id, _ := generation.ComputeID(g); id != g.ID {
		t.Errorf("ID = %s, content %s", g.ID, id)
	}
	if err := g.Validate(nil); err != nil {
		t.Error(err)
	}
	b, err := generation.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	back, err := generation.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != g.ID || len(generation.Diff(g, back).Pins) != 0 {
		t.Errorf("round trip changed the generation: %s vs %s", back.ID, g.ID)
	}
}

func TestNewFrom(t *testing.T) {
	from, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	runner := generation.Pin{Image: "registry.example/slipway/runner:v1.5.0@" + d1}
	g, err := generation.New("agents", from, map[generation.Kind]generation.Pin{
		generation.Runner: runner,
		generation.Model:  {}, // removed
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Sequence != 4 {
		t.Errorf("sequence = %d, want 4", g.Sequence)
	}
	if g.Compatibility != from.Compatibility {
		t.Errorf("compatibility = %+v, want from's", g.Compatibility)
	}
	if g.Verification != nil {
		t.Error("New copied the verification record")
	}
	if _, ok := g.Pins[generation.Model]; ok {
		t.Error("model not removed")
	}
	if !g.Pins[generation.Runner].Equal(runner) {
		t.Errorf("runner = %v", g.Pins[generation.Runner])
	}
	for _, k := range []generation.Kind{generation.ControlPlane, generation.Policy, generation.SecretVersion} {
		if !g.Pins[k].Equal(from.Pins[k]) {
			t.Errorf("%s = %v, want from's %v", k, g.Pins[k], from.Pins[k])
		}
	}
	// Pins are copied, not shared.
	from.Pins[generation.Policy].Git.Ref = "changed"
	if g.Pins[generation.Policy].Git.Ref != "main" {
		t.Error("New shares from's GitPin")
	}
	from.Pins[generation.Policy].Git.Ref = "main"

	// New compatibility.
	c := generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 4, Max: 5}, RunnerProtocol: generation.Range{Min: 2, Max: 3}}
	g2, err := generation.New("agents", g, nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Compatibility != c || g2.Sequence != 5 || g2.ID == g.ID {
		t.Errorf("New(compat) = %+v", g2)
	}
}

func TestNewRefusals(t *testing.T) {
	from, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := *from
	edited.Pool = "batch"
	for _, tc := range []struct {
		name string
		pool string
		from *generation.Generation
		pins map[generation.Kind]generation.Pin
		c    *generation.Compatibility
		is   error
		msg  string
	}{
		{"another pool", "batch", from, nil, nil, generation.ErrInvalid, `from ` + agentsID + ` is a generation of pool "agents", not "batch"`},
		{"edited from", "batch", &edited, nil, nil, generation.ErrInvalid, "from: testdata/agents.yaml:3: id: invalid generation: id " + agentsID + " does not match content"},
		{"unchanged", "agents", from, nil, nil, generation.ErrUnchanged, "the pins and compatibility are those of " + agentsID + " (sequence 3)"},
		{"unchanged pin given", "agents", from, map[generation.Kind]generation.Pin{generation.Runner: from.Pins[generation.Runner]}, nil, generation.ErrUnchanged, ""},
		{"first without compatibility", "agents", nil, map[generation.Kind]generation.Pin{generation.Runner: {Image: "r.example/r@" + d1}}, nil, generation.ErrInvalid, "compatibility: invalid generation: required for a pool's first generation"},
		{"no pins", "agents", nil, nil, compat34, generation.ErrInvalid, "generation: pins: invalid generation: no pins"},
		{"tag", "agents", from, map[generation.Kind]generation.Pin{generation.Runner: {Image: "r.example/r:v2"}}, nil, generation.ErrInvalid, `generation: pins.runner.image: invalid generation: "r.example/r:v2" is a tag: pin it by digest (slipway pin)`},
		{"unknown kind", "agents", from, map[generation.Kind]generation.Pin{"widget": {ID: "w"}}, nil, generation.ErrInvalid, `generation: pins.widget: invalid generation: unknown artifact kind "widget"`},
		{"bad pool", "Agents", nil, map[generation.Kind]generation.Pin{generation.Runner: {Image: "r.example/r@" + d1}}, compat34, generation.ErrInvalid, "generation: pool: invalid generation"},
		{"bad compat", "agents", from, nil, &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 2, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}, generation.ErrInvalid, "min 2 is above max 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := generation.New(tc.pool, tc.from, tc.pins, tc.c)
			if g != nil || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("New = %v, %v\nwant %v containing %q", g, err, tc.is, tc.msg)
			}
			if tc.is == generation.ErrUnchanged && errors.Is(err, generation.ErrInvalid) {
				t.Error("ErrUnchanged is also ErrInvalid")
			}
		})
	}
}

// TestRoundTripTrickyStrings: labels and ids that YAML would read as other
// types or syntax survive Marshal and Parse unchanged, with the same id.
func TestRoundTripTrickyStrings(t *testing.T) {
	for _, s := range []string{
		"true", "null", "~", "123", "0x1F", "1e3", "2026-11-29", "- x", "a: b", "#c", "'q'", `"q"`, "[x]", "{x}",
		"&a", "*a", "!tag", "%x", "@x", "`x", "|", ">", "modèle", "a\u2028b", "a b", "<&>", "\\",
	} {
		id := strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return '_'
			}
			return r
		}, s)
		g, err := generation.New("p", nil, map[generation.Kind]generation.Pin{
			generation.Model: {ID: id, Name: s, Tag: s},
		}, compat34)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		b, err := generation.Marshal(g)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		back, err := generation.Parse(b)
		if err != nil {
			t.Errorf("%q: %v\n%s", s, err, b)
			continue
		}
		if back.ID != g.ID || !back.Pins[generation.Model].Equal(g.Pins[generation.Model]) {
			t.Errorf("%q: round trip gave %+v", s, back.Pins[generation.Model])
		}
	}
}

// TestParseHandWritten: flow style and comments are fine; the id is what counts.
func TestParseHandWritten(t *testing.T) {
	doc := `# written by hand
apiVersion: slipway.dev/v1alpha1
kind: Generation
id: g-a31882d26e303c9bfdac32eea12212bffbb4f223bbd81e9965fb1cd0fed78ccc
pool: agents
sequence: 1
pins:
  secretVersion: {id: "vault://kv/agents/token#7"}   # a version, never a value
  runner: {image: "registry.example/runner:v1@sha256:1111111111111111111111111111111111111111111111111111111111111111"}
  policy: {git: {repo: "https://git.example/policies.git", commit: 0123456789abcdef0123456789abcdef01234567, ref: main}}
compatibility: {controlPlaneProtocol: {min: 3, max: 4}, runnerProtocol: {max: 2, min: 2}}
`
	g, err := generation.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if g.ID != "g-a31882d26e303c9bfdac32eea12212bffbb4f223bbd81e9965fb1cd0fed78ccc" || len(g.Pins) != 3 {
		t.Errorf("parsed %+v", g)
	}
}
