package generation_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

func TestKinds(t *testing.T) {
	want := []generation.Kind{"controlPlane", "runner", "workspaceTemplate", "nodeImage", "runtimeClass", "policy", "model", "promptBundle", "secretVersion"}
	if got := generation.Kinds(); !slices.Equal(got, want) {
		t.Errorf("Kinds = %v", got)
	}
	// The artifact-kind spellings are package policy's, in the same order.
	var artifact []string
	for _, k := range generation.Kinds() {
		artifact = append(artifact, k.ArtifactKind())
	}
	if !slices.Equal(artifact, policy.Kinds) {
		t.Errorf("ArtifactKind = %v, policy.Kinds = %v", artifact, policy.Kinds)
	}
	for i, k := range generation.Kinds() {
		for _, s := range []string{string(k), policy.Kinds[i]} {
			if got, err := generation.ParseKind(s); err != nil || got != k {
				t.Errorf("ParseKind(%q) = %q, %v", s, got, err)
			}
		}
		if !k.Valid() || len(k.Forms()) == 0 {
			t.Errorf("%s: Valid %v, Forms %v", k, k.Valid(), k.Forms())
		}
	}
	if _, err := generation.ParseKind("widget"); !errors.Is(err, generation.ErrInvalid) {
		t.Errorf("ParseKind(widget) err = %v", err)
	}
	bad := generation.Kind("widget")
	if bad.Valid() || bad.ArtifactKind() != "" || bad.Forms() != nil {
		t.Error("unknown kind looks valid")
	}
	if got := generation.ImageKinds(); !slices.Equal(got, []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate}) {
		t.Errorf("ImageKinds = %v", got)
	}
	if got := generation.Policy.Forms(); !slices.Equal(got, []generation.Form{generation.FormGit}) {
		t.Errorf("policy forms = %v", got)
	}
	// Forms returns a copy.
	generation.NodeImage.Forms()[0] = generation.FormGit
	if generation.NodeImage.Forms()[0] != generation.FormImage {
		t.Error("Forms shares its slice")
	}
}

func TestPinAccessors(t *testing.T) {
	for _, tc := range []struct {
		pin                          generation.Pin
		form                         generation.Form
		str, identity, tag, artifact string
	}{
		{generation.Pin{Image: "r.example/a/b:v1@" + d1}, generation.FormImage, "r.example/a/b:v1@" + d1, d1, "v1", "r.example/a/b"},
		{generation.Pin{Image: "r.example/a/b@" + d1}, generation.FormImage, "r.example/a/b@" + d1, d1, "", "r.example/a/b"},
		{generation.Pin{Git: &generation.GitPin{Repo: "https://g/p.git", Commit: "c0", Ref: "main"}}, generation.FormGit, "https://g/p.git@c0 (main)", "c0", "main", "https://g/p.git"},
		{generation.Pin{Git: &generation.GitPin{Repo: "git@g:p.git", Commit: "c0"}}, generation.FormGit, "git@g:p.git@c0", "c0", "", "git@g:p.git"},
		{generation.Pin{ID: "ami-1", Name: "debian", Tag: "2026.11"}, generation.FormID, "ami-1 (debian:2026.11)", "ami-1", "2026.11", "debian"},
		{generation.Pin{ID: "ami-1", Tag: "2026.11"}, generation.FormID, "ami-1 (:2026.11)", "ami-1", "2026.11", ""},
		{generation.Pin{ID: "ami-1"}, generation.FormID, "ami-1", "ami-1", "", ""},
		{generation.Pin{}, "", "(none)", "", "", ""},
		{generation.Pin{ID: "a", Image: "b"}, "", `(invalid pin: image "b", git false, id "a")`, "", "", ""},
	} {
		p := tc.pin
		if p.Form() != tc.form || p.String() != tc.str || p.Identity() != tc.identity || p.HumanTag() != tc.tag || p.ArtifactName() != tc.artifact {
			t.Errorf("%+v: form %q string %q identity %q tag %q name %q\nwant %q %q %q %q %q",
				p, p.Form(), p.String(), p.Identity(), p.HumanTag(), p.ArtifactName(), tc.form, tc.str, tc.identity, tc.tag, tc.artifact)
		}
	}
	a := generation.Pin{Git: &generation.GitPin{Repo: "r", Commit: "c"}}
	b := generation.Pin{Git: &generation.GitPin{Repo: "r", Commit: "c"}}
	if !a.Equal(b) || a.Equal(generation.Pin{ID: "c"}) || a.IsZero() || !(generation.Pin{}).IsZero() {
		t.Error("Equal/IsZero wrong")
	}
}
