package sbom

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
)

// TestCombine: the SBOMs of two trees, each with a Go binary, combined, are byte for byte what
// Generate writes for one tree holding both binaries, with and without a namespace given; the
// package list is the parts' together.
func TestCombine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exe, err := os.Executable() // a second Go binary: this test's own (its main module and the toolchain)
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{"usr/local/bin/tiny": buildTiny(t, t.TempDir()), "opt/test/sbom.test": exe}
	both := t.TempDir()
	var parts []*SBOM
	goOnly := WithCatalogers("go-module-binary-cataloger")
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range bins {
			if !yield(k) {
				return
			}
		}
	}) {
		one := t.TempDir()
		for _, root := range []string{one, both} {
			linkFile(t, bins[name], filepath.Join(root, name))
		}
		s, err := Generate(ctx, one, goOnly, WithDocumentName(filepath.Base(name)))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Packages()) == 0 {
			t.Fatalf("no packages in %s", name)
		}
		parts = append(parts, s)
	}
	for _, opts := range [][]Option{
		{WithDocumentName("both"), WithCreated(testCreated)},
		{WithDocumentName("both"), WithCreated(testCreated), WithNamespace("https://slipway.dev/test/both")},
	} {
		want, err := Generate(ctx, both, append([]Option{goOnly}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Combine(parts, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.SPDXJSON(), want.SPDXJSON()) {
			t.Errorf("combined spdx differs from the one tree's:\n%s", firstDiff(got.SPDXJSON(), want.SPDXJSON()))
		}
		if !bytes.Equal(got.CycloneDXJSON(), want.CycloneDXJSON()) {
			t.Errorf("combined cyclonedx differs from the one tree's:\n%s", firstDiff(got.CycloneDXJSON(), want.CycloneDXJSON()))
		}
		if union := sbomdoc.Sorted(append(parts[0].Packages(), parts[1].Packages()...)); !slices.Equal(got.Packages(), want.Packages()) || !slices.Equal(got.Packages(), union) {
			t.Errorf("combined packages %v, the tree's %v, the parts' %v", got.Packages(), want.Packages(), union)
		}
	}

	// Refused: no parts, a part not made by Generate, a file in two parts, catalogers.
	for _, c := range []struct {
		name  string
		parts []*SBOM
		opts  []Option
	}{
		{"no parts", nil, nil},
		{"a part not generated", []*SBOM{parts[0], {}}, nil},
		{"a file in two parts", []*SBOM{parts[0], parts[0]}, nil},
		{"catalogers", parts, []Option{goOnly}},
	} {
		if _, err := Combine(c.parts, c.opts...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: got %v, want %v", c.name, err, ErrInvalidOption)
		}
	}
}

// linkFile puts src at dst (a hard link, else a copy), creating dst's directory.
func linkFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Link(src, dst) != nil {
		copyFile(t, src, dst, 0o755)
	}
}
