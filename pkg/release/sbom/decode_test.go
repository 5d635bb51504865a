package sbom

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
)

// TestDecodeRoundTrip: the packages sbomdoc reads back from either document are the
// packages Generate found: names, versions and purls, and the type when a purl says it (a tree
// with an os-release has purls; without one, syft's type is in neither document).
func TestDecodeRoundTrip(t *testing.T) {
	for _, osRelease := range []bool{false, true} {
		root := t.TempDir()
		status := "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1\n\nPackage: openssl\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.0.17-1~deb12u2\n\n"
		files := map[string]string{"var/lib/dpkg/status": status}
		if osRelease {
			files["etc/os-release"] = "ID=debian\nVERSION_ID=\"12\"\n"
		}
		for name, data := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Generate(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		want := s.Packages()
		if len(want) != 2 || (want[0].PURL != "") != osRelease {
			t.Fatalf("Generate found %+v", want)
		}
		if !osRelease {
			for i := range want {
				want[i].Type = ""
			}
		}
		for name, doc := range map[string][]byte{"spdx": s.SPDXJSON(), "cyclonedx": s.CycloneDXJSON()} {
			got, err := sbomdoc.Decode(doc)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (os-release %v): decoded %v, generated %v", name, osRelease, got, want)
			}
		}
	}
	for _, bad := range []string{``, `{}`, `{"spdxVersion":"SPDX-9.9"}`, `not json`} {
		if _, err := sbomdoc.Decode([]byte(bad)); !errors.Is(err, sbomdoc.ErrDecode) {
			t.Errorf("sbomdoc.Decode(%q): %v, want sbomdoc.ErrDecode", bad, err)
		}
	}
}
