package generation_test

import (
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
)

func TestDiff(t *testing.T) {
	a, err := generation.Load("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d := generation.Diff(a, a); !d.Empty() || len(d.Pins) != 0 || d.Compatibility != nil {
		t.Errorf("Diff(a, a) = %+v", d)
	}
	c := a.Compatibility
	c.ControlPlaneProtocol = generation.Range{Min: 4, Max: 5}
	b, err := generation.New("agents", a, map[generation.Kind]generation.Pin{
		generation.Runner:            {Image: "registry.example/slipway/runner:v1.5.0@" + d1},
		generation.ControlPlane:      {Image: "registry.example/slipway/control-plane:v1.4.0-renamed@" + d1}, // same digest, new tag
		generation.Model:             {},
		generation.WorkspaceTemplate: {},
	}, &c)
	if err != nil {
		t.Fatal(err)
	}
	b, err = generation.New("agents", b, map[generation.Kind]generation.Pin{
		generation.WorkspaceTemplate: a.Pins[generation.WorkspaceTemplate], // back
		generation.Policy:            {Git: &generation.GitPin{Repo: "https://git.example/policies.git", Commit: strings.Repeat("cd", 20), Ref: "main"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	d := generation.Diff(a, b)
	var got []string
	for _, ch := range d.Pins {
		got = append(got, ch.String())
	}
	want := []string{
		"controlPlane: registry.example/slipway/control-plane:v1.4.0@" + d1 + " -> registry.example/slipway/control-plane:v1.4.0-renamed@" + d1,
		"runner: registry.example/slipway/runner:v1.4.0@" + d2 + " -> registry.example/slipway/runner:v1.5.0@" + d1,
		"policy: https://git.example/policies.git@" + strings.Repeat("ab", 20) + " (main) -> https://git.example/policies.git@" + strings.Repeat("cd", 20) + " (main)",
		"model: removed sha256:4444444444444444444444444444444444444444444444444444444444444444 (agent-model-8b)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff pins:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(d.Pins) == 4 {
		if !d.Pins[0].SameIdentity() || d.Pins[1].SameIdentity() || d.Pins[2].SameIdentity() || d.Pins[3].SameIdentity() {
			t.Error("SameIdentity wrong")
		}
		if !d.Pins[3].Removed() || d.Pins[3].Added() || d.Pins[0].Removed() {
			t.Error("Removed/Added wrong")
		}
		if d.Pins[1].From.HumanTag() != "v1.4.0" || d.Pins[1].To.HumanTag() != "v1.5.0" || d.Pins[1].To.Identity() != d1 {
			t.Errorf("runner change: tags %q -> %q, identity %s", d.Pins[1].From.HumanTag(), d.Pins[1].To.HumanTag(), d.Pins[1].To.Identity())
		}
	}
	if d.Compatibility == nil || d.Compatibility.String() != "controlPlaneProtocol 3..4 -> 4..5" {
		t.Errorf("compatibility change = %+v", d.Compatibility)
	}
	if d.Empty() {
		t.Error("Empty")
	}

	// Reversed: the removal is an addition.
	r := generation.Diff(b, a)
	if last := r.Pins[len(r.Pins)-1]; !last.Added() || last.String() != "model: added sha256:4444444444444444444444444444444444444444444444444444444444444444 (agent-model-8b)" {
		t.Errorf("reverse last change = %v", last)
	}
}
