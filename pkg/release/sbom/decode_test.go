package sbom

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDecodeRoundTrip: the packages read back from either document are the
// packages Generate found (name and version; purls and types too).
func TestDecodeRoundTrip(t *testing.T) {
	root := t.TempDir()
	status := "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1\n\nPackage: openssl\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.0.17-1~deb12u2\n\n"
	if err := os.MkdirAll(filepath.Join(root, "var/lib/dpkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Generate(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	want := s.Packages()
	if len(want) != 2 {
		t.Fatalf("Generate found %+v", want)
	}
	for name, doc := range map[string][]byte{"spdx": s.SPDXJSON(), "cyclonedx": s.CycloneDXJSON()} {
		got, err := Decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		nv := func(ps []Package) []string {
			var out []string
			for _, p := range ps {
				out = append(out, p.Name+"@"+p.Version)
			}
			return out
		}
		if !slices.Equal(nv(got), nv(want)) {
			t.Errorf("%s: decoded %v, generated %v", name, nv(got), nv(want))
		}
	}
	for _, bad := range []string{``, `{}`, `{"spdxVersion":"SPDX-9.9"}`, `not json`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(%q): %v, want ErrDecode", bad, err)
		}
	}
}
