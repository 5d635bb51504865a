// Package selfrelease releases Slipway itself, with Slipway's own release
// code: it builds slipway, slipway-cmp and slipway-runner for each platform
// from a clean, tagged tree (-trimpath, CGO_ENABLED=0, -buildvcs=false,
// -ldflags "-s -w -buildid=" and the version stamped), writes a GoReleaser-style
// checksums.txt and its signature (cosign sign-blob's format), an SPDX SBOM per
// binary (package sbom, as templates get), SLSA v1 provenance naming the
// commit, the Go version and BuilderID (package attest), and a verification
// policy naming that builder (package policy). It assembles an OCI image of
// each program per platform without a daemon (the runner's with the
// Options.RunnerImage the caller gives, sandbox.RunnerImage, so it carries
// the runner labels), on an empty base
// (the binaries are static; no base image can be pulled offline), as
// multi-platform indexes written to an OCI layout, and with a registry pushes
// them by digest, signs and attests them (package sign) and tags them last.
// An image's SBOM is its binaries' SBOMs combined (sbom.Combine): the image
// holds the binary alone, so syft does not catalogue it a second time.
//
// The same commit gives the same bytes: times come from the commit's time
// (SOURCE_DATE_EPOCH), nothing records when or where the release ran.
//
// `slipway release` is its command line; `make release VERSION=vX.Y.Z` runs it.
package selfrelease
