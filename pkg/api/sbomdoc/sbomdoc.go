package sbomdoc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrDecode: a document is not an SPDX 2 or CycloneDX JSON SBOM.
var ErrDecode = errors.New("sbomdoc: not a readable SPDX or CycloneDX JSON document")

// Package is one package of an SBOM, as the run-manifest index records it
// (by name and version).
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Type is the package's type as syft names it: deb, apk, rpm,
	// go-module, python, npm, java-archive, binary, … Decode derives it
	// from the purl's type, and leaves it "" where it cannot.
	Type string `json:"type"`
	// PURL is the package URL, for example pkg:deb/debian/openssl@3.0.17-1~deb12u2?arch=amd64&distro=debian-12.
	PURL string `json:"purl,omitempty"`
}

// Compare orders packages by name, version, type and purl.
func Compare(a, b Package) int {
	return cmp.Or(
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Version, b.Version),
		cmp.Compare(a.Type, b.Type),
		cmp.Compare(a.PURL, b.PURL),
	)
}

// Sorted sorts ps with Compare and drops exact duplicates (the same npm
// package in two node_modules folders is one entry), in place.
func Sorted(ps []Package) []Package {
	slices.SortFunc(ps, Compare)
	return slices.Compact(ps)
}

// MaxDocument bounds what Decode reads (an SBOM of a large image is a few
// MB; this is far above that).
const MaxDocument = 256 << 20

// Decode reads the packages of an SPDX 2 or CycloneDX JSON document (as
// pkg/release/sbom writes them, or as an SBOM attestation's predicate
// carries them), sorted and without duplicates. The package an SPDX
// document describes (the scanned tree itself) and CycloneDX's
// operating-system and file components are not packages of the tree and
// are left out. Errors wrap ErrDecode.
func Decode(doc []byte) ([]Package, error) {
	if len(doc) > MaxDocument {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrDecode, len(doc), MaxDocument)
	}
	var head struct {
		SPDXVersion string `json:"spdxVersion"`
		BOMFormat   string `json:"bomFormat"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	switch {
	case strings.HasPrefix(head.SPDXVersion, "SPDX-2."):
		return decodeSPDX(doc)
	case head.BOMFormat == "CycloneDX":
		return decodeCycloneDX(doc)
	case head.SPDXVersion != "":
		return nil, fmt.Errorf("%w: SPDX version %q", ErrDecode, head.SPDXVersion)
	}
	return nil, ErrDecode
}

type spdxDoc struct {
	DocumentDescribes []string `json:"documentDescribes"`
	Packages          []struct {
		SPDXID       string `json:"SPDXID"`
		Name         string `json:"name"`
		VersionInfo  string `json:"versionInfo"`
		ExternalRefs []struct {
			ReferenceType    string `json:"referenceType"`
			ReferenceLocator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []struct {
		Element string `json:"spdxElementId"`
		Related string `json:"relatedSpdxElement"`
		Type    string `json:"relationshipType"`
	} `json:"relationships"`
}

func decodeSPDX(doc []byte) ([]Package, error) {
	var d spdxDoc
	if err := json.NewDecoder(bytes.NewReader(doc)).Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	described := map[string]bool{}
	for _, id := range d.DocumentDescribes {
		described[id] = true
	}
	for _, r := range d.Relationships {
		if r.Type == "DESCRIBES" && r.Element == "SPDXRef-DOCUMENT" {
			described[r.Related] = true
		}
	}
	out := []Package{}
	for _, p := range d.Packages {
		if described[p.SPDXID] {
			continue
		}
		pk := Package{Name: p.Name, Version: p.VersionInfo}
		for _, r := range p.ExternalRefs {
			if r.ReferenceType == "purl" {
				pk.PURL = r.ReferenceLocator
				break
			}
		}
		pk.Type = typeOf(pk.PURL)
		out = append(out, pk)
	}
	return Sorted(out), nil
}

type cdxComponent struct {
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	Version    string         `json:"version"`
	PURL       string         `json:"purl"`
	Components []cdxComponent `json:"components"`
}

func decodeCycloneDX(doc []byte) ([]Package, error) {
	var d struct {
		Components []cdxComponent `json:"components"`
	}
	if err := json.NewDecoder(bytes.NewReader(doc)).Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	out := []Package{}
	var walk func([]cdxComponent)
	walk = func(cs []cdxComponent) {
		for _, c := range cs {
			if c.Type != "operating-system" && c.Type != "file" {
				out = append(out, Package{Name: c.Name, Version: c.Version, PURL: c.PURL, Type: typeOf(c.PURL)})
			}
			walk(c.Components)
		}
	}
	walk(d.Components)
	return Sorted(out), nil
}

// purlTypes maps a purl's type to syft's package type, for the
// ecosystems whose name differs or that syft names one way.
var purlTypes = map[string]string{
	"alpm": "alpm", "apk": "apk", "deb": "deb", "rpm": "rpm",
	"golang": "go-module", "pypi": "python", "npm": "npm", "maven": "java-archive",
	"gem": "gem", "cargo": "rust-crate", "composer": "php-composer", "nuget": "dotnet",
	"hex": "hex", "pub": "dart-pub", "cocoapods": "pod", "conan": "conan",
	"hackage": "hackage", "swift": "swift", "github": "github-action",
}

// typeOf is the syft type of a purl ("pkg:deb/debian/openssl@3.0.7" is
// deb), "" when the purl is absent or of another type.
func typeOf(purl string) string {
	rest, ok := strings.CutPrefix(purl, "pkg:")
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, "/")
	return purlTypes[strings.ToLower(t)]
}
