package attest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestGoReleaseProvenance(t *testing.T) {
	d := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	r := GoRelease{
		Subjects: []Subject{{"slipway-linux-arm64", d("b")}, {"slipway-linux-amd64", d("a")}},
		Source:   "git+https://github.com/slipway-dev/slipway", Commit: strings.Repeat("c", 40), Version: "v1.2.3",
		Packages: []string{"./cmd/slipway"}, Platforms: []string{"linux/amd64", "linux/arm64"}, GoVersion: "go1.26.8",
		Flags: []string{"-trimpath"}, Env: map[string]string{"CGO_ENABLED": "0"}, BuilderID: "https://example/builder", Epoch: 1700000000,
	}
	st, err := GoReleaseProvenance(r)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	// Subjects in another order: the same bytes.
	r.Subjects[0], r.Subjects[1] = r.Subjects[1], r.Subjects[0]
	st2, _ := GoReleaseProvenance(r)
	if b2, _ := Marshal(st2); !bytes.Equal(b1, b2) {
		t.Fatalf("not deterministic:\n%s\n%s", b1, b2)
	}
	back, err := Parse(b1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ProvenanceOf(back)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetRunDetails().GetBuilder().GetId() != r.BuilderID || p.GetBuildDefinition().GetBuildType() != BuildTypeGoRelease {
		t.Fatalf("read back %v", p)
	}
	if dep := p.GetBuildDefinition().GetResolvedDependencies()[0]; dep.GetDigest()["gitCommit"] != r.Commit {
		t.Fatalf("source dependency %v", dep)
	}
	if got := back.GetSubject()[0].GetName(); got != "slipway-linux-amd64" {
		t.Fatalf("subjects not sorted: %s", got)
	}
	r.Commit = "main"
	if _, err := GoReleaseProvenance(r); !errors.Is(err, ErrValidation) {
		t.Fatalf("a branch for a commit: %v", err)
	}
}
