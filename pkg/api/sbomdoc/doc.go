// Package sbomdoc reads the package list of an SBOM document: SPDX 2 JSON
// or CycloneDX JSON, as pkg/release/sbom writes them and as an SBOM
// attestation's predicate carries them. A runtime decodes a verified
// template SBOM with it to index the template's packages for run queries
// ("which runs used a template containing openssl@3.0.7?").
//
//	pkgs, err := sbomdoc.Decode(predicate) // []sbomdoc.Package, sorted
//
// It is a contract package: it imports only the standard library, so that
// reading an SBOM does not link syft. It does not generate SBOMs (that is
// pkg/release/sbom, with syft), verify attestations (pkg/release/policy),
// or read anything of a document beyond its packages' names, versions and
// purls.
package sbomdoc
