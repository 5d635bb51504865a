package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architectureDoc holds the architecture picture (the README links to it).
const architectureDoc = "docs/architecture.md"

// TestArchitectureIsTheTree holds docs/architecture.md's picture to the tree:
// it names every package under pkg/, internal/ and testharness/, and nothing
// that is not one.
func TestArchitectureIsTheTree(t *testing.T) {
	b, err := os.ReadFile("../../" + architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- architecture:"
	s := string(b)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatal(architectureDoc + ": no architecture block (" + marker + " ...)")
	}
	block := s[i:]
	start := strings.Index(block, "```\n")
	end := strings.Index(block[start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal(architectureDoc + ": the architecture block has no fenced picture")
	}
	picture := block[start+4 : start+4+end]
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:pkg|internal|testharness)/[a-z0-9/]+`).FindAllString(picture, -1) {
		named[strings.TrimSuffix(m, "/")] = true
	}
	out, err := exec.Command("go", "list", "../../pkg/...", "../../internal/...", "../../testharness/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, mod))
	}
	for _, p := range pkgs {
		if !named[p] {
			t.Errorf("%s does not name %s: add it to its plane's line", architectureDoc, p)
		}
	}
	for p := range named {
		// a plane's folder (pkg/control is both) or a package
		if !slices.Contains(pkgs, p) && !slices.ContainsFunc(pkgs, func(q string) bool { return strings.HasPrefix(q, p+"/") }) {
			t.Errorf("%s names %s, which is no package or plane of the tree", architectureDoc, p)
		}
	}
}
