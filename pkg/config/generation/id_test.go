package generation_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

// The canonical encodings below are written by hand from the rules in
// doc.go (and were checked with Python's json.dumps(sort_keys=True,
// separators=(",", ":"), ensure_ascii=False)), and the ids are their
// sha256, fixed here so that any change of encoding is caught.
const (
	agentsCanonical = `{"compatibility":{"controlPlaneProtocol":{"max":4,"min":3},"runnerProtocol":{"max":2,"min":2}},` +
		`"pins":{` +
		`"controlPlane":{"image":"registry.example/slipway/control-plane:v1.4.0@sha256:1111111111111111111111111111111111111111111111111111111111111111"},` +
		`"model":{"id":"sha256:4444444444444444444444444444444444444444444444444444444444444444","name":"agent-model-8b"},` +
		`"nodeImage":{"id":"ami-0abc1234def567890","name":"debian-12-agents","tag":"2026.11"},` +
		`"policy":{"git":{"commit":"abababababababababababababababababababab","ref":"main","repo":"https://git.example/policies.git"}},` +
		`"promptBundle":{"image":"registry.example/prompts/agent:2026-11@sha256:5555555555555555555555555555555555555555555555555555555555555555"},` +
		`"runner":{"image":"registry.example/slipway/runner:v1.4.0@sha256:2222222222222222222222222222222222222222222222222222222222222222"},` +
		`"runtimeClass":{"id":"gvisor-release-20261015.0"},` +
		`"secretVersion":{"id":"vault://kv/agents/token#7"},` +
		`"workspaceTemplate":{"image":"registry.example/templates/python@sha256:3333333333333333333333333333333333333333333333333333333333333333"}` +
		`},"pool":"agents"}`
	agentsID = "g-d140b0c739a80b74feeab04416f8317054f1f5e851edd6c0bf79d929f8a9846a"

	// Escaping: '"' and '\' are escaped, '<', '&', non-ASCII and U+2028 are not.
	labelCanonical = `{"compatibility":{"controlPlaneProtocol":{"max":1,"min":1},"runnerProtocol":{"max":2,"min":1}},` +
		`"pins":{"model":{"id":"m-1","name":"modèle <8b> & \"q\" ` + "\u2028" + ` \\ ok"}},"pool":"p"}`
	labelID = "g-8c75f774ae9b8713161d9a02c39d4d5725fe67c3cc52413ea8923f273f3b7a10"
)

func TestIDIsFixed(t *testing.T) {
	agents, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	label := &generation.Generation{
		APIVersion: generation.APIVersion, Kind: generation.DocumentKind, Pool: "p", Sequence: 1,
		Pins: generation.Pins{generation.Model: {ID: "m-1", Name: "modèle <8b> & \"q\" \u2028 \\ ok"}},
		Compatibility: generation.Compatibility{
			ControlPlaneProtocol: generation.Range{Min: 1, Max: 1},
			RunnerProtocol:       generation.Range{Min: 1, Max: 2},
		},
	}
	for _, tc := range []struct {
		name      string
		g         *generation.Generation
		canonical string
		id        string
	}{
		{"agents", agents, agentsCanonical, agentsID},
		{"escaping", label, labelCanonical, labelID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(tc.canonical))
			if got := "g-" + hex.EncodeToString(sum[:]); got != tc.id {
				t.Fatalf("the test's own constants disagree: sha256 of the canonical string is %s, want %s", got, tc.id)
			}
			c, err := generation.Canonical(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if string(c) != tc.canonical {
				t.Errorf("Canonical =\n%s\nwant\n%s", c, tc.canonical)
			}
			id, err := generation.ComputeID(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			if id != tc.id {
				t.Errorf("ComputeID = %s, want %s", id, tc.id)
			}
		})
	}
	if agents.ID != agentsID {
		t.Errorf("testdata/agents.yaml id = %s, want %s", agents.ID, agentsID)
	}
}

// TestIDCoverage: what is hashed changes the id, what is not does not.
func TestIDCoverage(t *testing.T) {
	base, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	id := func(mutate func(g *generation.Generation)) string {
		g := *base
		g.Pins = generation.Pins{}
		for k, p := range base.Pins {
			if p.Git != nil {
				gp := *p.Git
				p.Git = &gp
			}
			g.Pins[k] = p
		}
		mutate(&g)
		s, err := generation.ComputeID(&g)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pin := func(k generation.Kind, f func(p *generation.Pin)) func(*generation.Generation) {
		return func(g *generation.Generation) {
			p := g.Pins[k]
			f(&p)
			g.Pins[k] = p
		}
	}
	same := map[string]func(*generation.Generation){
		"sequence":     func(g *generation.Generation) { g.Sequence = 99 },
		"verification": func(g *generation.Generation) { g.Verification = nil },
		"verifiedAt":   func(g *generation.Generation) { v := *g.Verification; v.VerifiedAt = time.Now(); g.Verification = &v },
		"id":           func(g *generation.Generation) { g.ID = "" },
		"file":         func(g *generation.Generation) { g.File = "elsewhere.yaml" },
	}
	for name, m := range same {
		if got := id(m); got != agentsID {
			t.Errorf("changing %s changed the id to %s", name, got)
		}
	}
	changed := map[string]func(*generation.Generation){
		"pool": func(g *generation.Generation) { g.Pool = "batch" },
		"image tag": pin(generation.Runner, func(p *generation.Pin) {
			p.Image = strings.Replace(p.Image, "v1.4.0", "v1.4.1", 1)
		}),
		"image digest": pin(generation.Runner, func(p *generation.Pin) {
			p.Image = strings.Replace(p.Image, "2222", "2223", 1)
		}),
		"git ref":      pin(generation.Policy, func(p *generation.Pin) { p.Git.Ref = "release" }),
		"git commit":   pin(generation.Policy, func(p *generation.Pin) { p.Git.Commit = strings.Repeat("cd", 20) }),
		"id label":     pin(generation.NodeImage, func(p *generation.Pin) { p.Tag = "2026.12" }),
		"id":           pin(generation.SecretVersion, func(p *generation.Pin) { p.ID = "vault://kv/agents/token#8" }),
		"removed kind": func(g *generation.Generation) { delete(g.Pins, generation.Model) },
		"cp protocol":  func(g *generation.Generation) { g.Compatibility.ControlPlaneProtocol.Max = 5 },
		"runner proto": func(g *generation.Generation) { g.Compatibility.RunnerProtocol.Min = 1 },
	}
	seen := map[string]string{agentsID: "base"}
	for name, m := range changed {
		got := id(m)
		if prev, dup := seen[got]; dup {
			t.Errorf("changing %s gives the id of %s: %s", name, prev, got)
		}
		seen[got] = name
	}
}

func TestComputeIDRefusesInvalidUTF8(t *testing.T) {
	g := &generation.Generation{Pool: "p", Pins: generation.Pins{generation.Model: {ID: "a\xff"}}}
	if _, err := generation.ComputeID(g); err == nil {
		t.Fatal("ComputeID accepted invalid UTF-8 (JSON would have replaced it)")
	}
}
