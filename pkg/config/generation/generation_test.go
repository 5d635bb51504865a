package generation_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

func readAgents(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replace replaces old, which must occur, in s.
func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("fixture has no %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestLoadRefusals(t *testing.T) {
	good := readAgents(t)
	r := func(old, new string) func(t *testing.T) string {
		return func(t *testing.T) string { return replace(t, good, old, new) }
	}
	const small = "apiVersion: slipway.dev/v1alpha1\nkind: Generation\nid: g-0000000000000000000000000000000000000000000000000000000000000000\n" +
		"pool: p\nsequence: 1\n"
	const compat = "compatibility:\n  controlPlaneProtocol: {min: 1, max: 1}\n  runnerProtocol: {min: 1, max: 1}\n"
	lit := func(s string) func(*testing.T) string { return func(*testing.T) string { return s } }
	tests := []struct {
		name  string
		body  func(t *testing.T) string
		line  int
		field string // "" for decoding errors, which name no field
		msg   string
	}{
		// Decoding.
		{"unknown field", lit(good + "extra: 1\n"), 57, "", "unknown field \"extra\""},
		{"unknown pin field", r("    id: gvisor-release-20261015.0\n", "    id: gvisor-release-20261015.0\n    digest: x\n"), 19, "", "unknown field \"digest\""},
		{"unknown verification field", r("  verifiedAt:", "  verifiedBy: me\n  verifiedAt:"), 42, "", "unknown field \"verifiedBy\""},
		{"duplicate kind", r("  runner:\n", "  runner:\n    image: x\n  runner:\n"), 11, "", "already defined"},
		{"sequence not a number", r("sequence: 3", "sequence: three"), 5, "", "got a "},
		{"second document", lit(good + "---\nkind: x\n"), 57, "", "one document per file"},
		{"too big", lit(good + "# " + strings.Repeat("x", generation.MaxSize) + "\n"), 0, "", "over the limit"},

		// The document.
		{"wrong apiVersion", r("v1alpha1", "v1"), 1, "apiVersion", `"slipway.dev/v1", want "slipway.dev/v1alpha1"`},
		{"wrong kind", r("kind: Generation", "kind: Pool"), 2, "kind", `"Pool", want "Generation"`},
		{"bad pool", r("pool: agents", "pool: Agents_1"), 4, "pool", "is not a pool name"},
		{"no pool", r("pool: agents\n", ""), 1, "pool", `"" is not a pool name`},
		{"sequence 0", r("sequence: 3", "sequence: 0"), 5, "sequence", "sequences start at 1"},
		{"sequence negative", r("sequence: 3", "sequence: -2"), 5, "sequence", "sequences start at 1"},
		{"no pins", lit(small + "pins: {}\n" + compat), 6, "pins", "no pins"},

		// Pins.
		{"unknown kind", r("pins:\n", "pins:\n  widget:\n    id: w-1\n"), 8, "pins.widget", `unknown artifact kind "widget"`},
		{"kebab-case kind", r("  workspaceTemplate:", "  workspace-template:"), 12, "pins.workspace-template", "unknown artifact kind"},
		{"tag", r("runner:v1.4.0@"+d2, "runner:v1.4.0"), 10, "pins.runner.image", `"registry.example/slipway/runner:v1.4.0" is a tag: pin it by digest (slipway pin)`},
		{"no tag no digest", r("python@sha256:3333333333333333333333333333333333333333333333333333333333333333", "python"), 12, "pins.workspaceTemplate.image", "is a tag: pin it by digest (slipway pin)"},
		{"bad digest", r("control-plane:v1.4.0@"+d1, "control-plane:v1.4.0@sha256:abc"), 8, "pins.controlPlane.image", "invalid image reference"},
		{"not canonical", r("registry.example/slipway/control-plane:v1.4.0", "slipway/control-plane:v1.4.0"), 8, "pins.controlPlane.image", `not in canonical form: write "index.docker.io/slipway/control-plane:v1.4.0@` + d1 + `"`},
		{"empty image", r("image: registry.example/templates/python@sha256:3333333333333333333333333333333333333333333333333333333333333333", `image: ""`), 12, "pins.workspaceTemplate", "empty pin: workspaceTemplate is pinned by image"},
		{"null pin", r("  runtimeClass:\n    id: gvisor-release-20261015.0\n", "  runtimeClass:\n"), 17, "pins.runtimeClass", "empty pin"},
		{"image and id", r("    image: registry.example/slipway/runner", "    id: r-1\n    image: registry.example/slipway/runner"), 10, "pins.runner", "both image and id set"},
		{"image, git and id", r("    id: ami-0abc1234def567890\n", "    id: ami-0abc1234def567890\n    image: x\n    git: {repo: r, commit: c}\n"), 14, "pins.nodeImage", "image, git and id all set"},
		{"image for id kind", r("    id: gvisor-release-20261015.0", "    image: registry.example/gvisor@"+d1), 18, "pins.runtimeClass.image", "runtimeClass is pinned by id, not image"},
		{"id for image kind", r("    image: registry.example/slipway/runner:v1.4.0@"+d2, "    id: runner-1"), 10, "pins.runner.id", "runner is pinned by image, not id"},
		{"id for policy", r("    git:\n      repo: https://git.example/policies.git\n      commit: abababababababababababababababababababab\n      ref: main\n", "    id: policies-7\n"), 20, "pins.policy.id", "policy is pinned by git, not id"},
		{"git for secret", r("    id: vault://kv/agents/token#7", "    git: {repo: r, commit: abababababababababababababababababababab}"), 30, "pins.secretVersion.git", "secretVersion is pinned by id, not git"},
		{"name on image", r("    image: registry.example/slipway/runner", "    name: runner\n    image: registry.example/slipway/runner"), 10, "pins.runner.name", "name labels an id pin only"},
		{"tag on git", r("      ref: main\n", "      ref: main\n    tag: v7\n"), 24, "pins.policy.tag", "a git pin carries its ref in git.ref"},
		{"branch for commit", r("commit: abababababababababababababababababababab", "commit: main"), 22, "pins.policy.git.commit", `"main" is not a commit id (40 or 64 lower-case hex digits): resolve a branch or tag`},
		{"short commit", r("commit: abababababababababababababababababababab", "commit: abababa"), 22, "pins.policy.git.commit", "is not a commit id"},
		{"upper-case commit", r("commit: abababababababababababababababababababab", "commit: ABABABABABABABABABABABABABABABABABABABAB"), 22, "pins.policy.git.commit", "lower-case"},
		{"no repo", r("      repo: https://git.example/policies.git\n", ""), 21, "pins.policy.git.repo", "required"},
		{"repo with space", r("repo: https://git.example/policies.git", "repo: https://git.example/my policies.git"), 21, "pins.policy.git.repo", "white space"},
		{"ref with space", r("ref: main", "ref: main line"), 23, "pins.policy.git.ref", "white space"},
		{"id with space", r("id: vault://kv/agents/token#7", "id: vault://kv/agents/token 7"), 30, "pins.secretVersion.id", "white space"},
		{"id too long", r("id: vault://kv/agents/token#7", "id: "+strings.Repeat("x", 1025)), 30, "pins.secretVersion.id", "over the limit"},
		{"label with control", r("name: agent-model-8b", `name: "agent\u0007model"`), 26, "pins.model.name", "control characters"},
		{"label too long", r("name: agent-model-8b", "name: "+strings.Repeat("m", 257)), 26, "pins.model.name", "over the limit of 256"},
		{"label padded", r("name: agent-model-8b", `name: " agent"`), 26, "pins.model.name", "white space at an end"},

		// Compatibility.
		{"min above max", r("    min: 3\n    max: 4", "    min: 5\n    max: 4"), 33, "compatibility.controlPlaneProtocol", "min 5 is above max 4"},
		{"min 0", r("    min: 2\n", "    min: 0\n"), 36, "compatibility.runnerProtocol.min", "protocol versions start at 1"},
		{"max too big", r("    max: 4", "    max: 9999999999"), 34, "compatibility.controlPlaneProtocol.max", "over the limit"},
		{"no compatibility", r("compatibility:\n  controlPlaneProtocol:\n    min: 3\n    max: 4\n  runnerProtocol:\n    min: 2\n    max: 2\n", ""), 1, "compatibility.controlPlaneProtocol.min", "protocol versions start at 1"},

		// Verification.
		{"bad policy name", r("    name: agents\n", "    name: Agents!\n"), 40, "verification.policy.name", "is not a policy name"},
		{"bad policy digest", r("    digest: sha256:6666666666666666666666666666666666666666666666666666666666666666", "    digest: md5:66"), 41, "verification.policy.digest", "is not sha256:<64 hex>"},
		{"no verifiedAt", r("  verifiedAt: 2026-11-29T12:00:00Z\n", ""), 39, "verification.verifiedAt", "required"},
		{"unknown verified kind", r("  - kind: controlPlane\n", "  - kind: widget\n"), 44, "verification.artifacts[0].kind", `unknown artifact kind "widget"`},
		{"verified twice", r("  - kind: workspaceTemplate\n", "  - kind: controlPlane\n"), 48, "verification.artifacts[1].kind", "controlPlane is recorded twice"},
		{"verified id pin", r("  - kind: controlPlane\n    digest: "+d1, "  - kind: nodeImage\n    digest: "+d1), 44, "verification.artifacts[0].kind", "nodeImage is pinned by id: only image pins are verified"},
		{"verified other digest", r("  - kind: controlPlane\n    digest: "+d1, "  - kind: controlPlane\n    digest: "+d2), 45, "verification.artifacts[0].digest", "is not the digest of the controlPlane pin"},
		{"empty signature", r("    - sha256:7777777777777777777777777777777777777777777777777777777777777777", `    - ""`), 47, "verification.artifacts[0].signatures[0]", "empty"},
		{"bad attestation digest", r("      digest: sha256:9999999999999999999999999999999999999999999999999999999999999999", "      digest: sha256:99"), 54, "verification.artifacts[1].attestations[0].digest", "is not sha256:<64 hex>"},
		{"no predicate type", r("    - predicateType: https://spdx.dev/Document\n", "    - predicateType: \"\"\n"), 55, "verification.artifacts[1].attestations[1].predicateType", "empty"},

		// Identity, checked last.
		{"edited tag", r("runner:v1.4.0@", "runner:v1.4.1@"), 3, "id", "id " + agentsID + " does not match content g-"},
		{"edited pool", r("pool: agents", "pool: batch"), 3, "id", "does not match content"},
		{"no id", r("id: "+agentsID+"\n", ""), 1, "id", "required: the id of this content is " + agentsID},
		{"malformed id", r("id: "+agentsID, "id: G-"+strings.ToUpper(agentsID[2:])), 3, "id", "is not g-<64 hex>"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body(t)
			file := filepath.Join(dir, "gen.yaml")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			check := func(name string, err error) {
				t.Helper()
				if !errors.Is(err, generation.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				want := name + ":"
				if tc.line > 0 {
					want += strconv.Itoa(tc.line) + ":"
				}
				if tc.field != "" {
					want += " " + tc.field + ": " + generation.ErrInvalid.Error() + ": "
				}
				if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("err = %q\nwant prefix %q and %q", err, want, tc.msg)
				}
			}
			_, err := generation.Load(file)
			check(file, err)
			_, err = generation.Parse([]byte(body))
			check("<generation>", err)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := generation.Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not exist", err)
	}
}

func TestLoadGood(t *testing.T) {
	g, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if g.ID != agentsID || g.Pool != "agents" || g.Sequence != 3 || len(g.Pins) != 9 || g.File != "testdata/agents.yaml" {
		t.Errorf("loaded %+v", g)
	}
	if got := g.Pins[generation.Policy].Git.Commit; got != strings.Repeat("ab", 20) {
		t.Errorf("policy commit = %q", got)
	}
	if v := g.Verification; v == nil || len(v.Artifacts) != 2 || v.Artifacts[1].Attestations[0].PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("verification = %+v", v)
	}
	if err := g.Validate(generation.Kinds()); err != nil {
		t.Errorf("Validate(all kinds): %v", err)
	}
}

func TestValidateRequired(t *testing.T) {
	// The full generation without model and runtimeClass, written to a file.
	full, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := generation.New("agents", full, map[generation.Kind]generation.Pin{generation.Model: {}, generation.RuntimeClass: {}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := generation.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), g.ID+".yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := generation.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Validate([]generation.Kind{generation.Runner, generation.Policy}); err != nil {
		t.Errorf("Validate(runner, policy): %v", err)
	}
	if err := loaded.Validate(nil); err != nil {
		t.Errorf("Validate(nil): %v", err)
	}
	err = loaded.Validate([]generation.Kind{generation.Model, generation.Runner, generation.RuntimeClass})
	// The line is the first line of the pins mapping.
	want := file + ":7: pins: invalid generation: missing runtimeClass, model: pool agents requires them"
	if !errors.Is(err, generation.ErrInvalid) || err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	// In memory: no file:line.
	err = g.Validate(generation.Kinds())
	want = "generation: pins: invalid generation: missing runtimeClass, model: pool agents requires them"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if err := g.Validate([]generation.Kind{"widget"}); !errors.Is(err, generation.ErrInvalid) || !strings.Contains(err.Error(), `"widget"`) {
		t.Errorf("Validate(widget) = %v", err)
	}
}

func TestMarshalGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := generation.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal(Load(agents.yaml)) differs:\n%s", got)
	}
	// Twice gives the same bytes; the id is written even when g has none,
	// and g is not modified.
	g.ID = ""
	again, err := generation.Marshal(g)
	if err != nil || !bytes.Equal(again, want) {
		t.Errorf("Marshal without id: %v\n%s", err, again)
	}
	if g.ID != "" {
		t.Errorf("Marshal set g.ID to %s", g.ID)
	}
}

func TestMarshalRefuses(t *testing.T) {
	g, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Editing a generation in place is refused: a change is a new generation.
	g.Pins[generation.Runner] = generation.Pin{Image: "registry.example/slipway/runner:v1.5.0@" + d2}
	_, err = generation.Marshal(g)
	if !errors.Is(err, generation.ErrInvalid) || !strings.HasPrefix(err.Error(), "generation: id: invalid generation: id "+agentsID+" does not match content") {
		t.Errorf("Marshal(edited) err = %v", err)
	}
	g.ID = ""
	g.Pins[generation.Runner] = generation.Pin{Image: "registry.example/slipway/runner:v1.5.0"}
	_, err = generation.Marshal(g)
	if !errors.Is(err, generation.ErrInvalid) || !strings.Contains(err.Error(), "pins.runner.image: invalid generation: \"registry.example/slipway/runner:v1.5.0\" is a tag") {
		t.Errorf("Marshal(tag) err = %v", err)
	}
}

func TestRange(t *testing.T) {
	r := generation.Range{Min: 3, Max: 4}
	for v, want := range map[int]bool{2: false, 3: true, 4: true, 5: false} {
		if r.Contains(v) != want {
			t.Errorf("%v.Contains(%d) = %v", r, v, !want)
		}
	}
	for o, want := range map[generation.Range]bool{{Min: 1, Max: 2}: false, {Min: 1, Max: 3}: true, {Min: 4, Max: 9}: true, {Min: 5, Max: 5}: false} {
		if r.Overlaps(o) != want || o.Overlaps(r) != want {
			t.Errorf("%v.Overlaps(%v) = %v", r, o, !want)
		}
	}
}
