// Package attest builds and reads the in-toto Statement v1 documents that
// travel with Slipway's artifacts: SLSA provenance v1 for template builds and
// SBOM attestations (SPDX or CycloneDX) for any image.
//
// Statements are built only from the in-toto attestation Go types
// (github.com/in-toto/attestation/go/v1 and its provenance/v1 predicate), never
// from hand-made JSON, and are serialised only through protojson. Plain
// encoding/json of those generated types writes proto field names such as
// "predicate_type" and a {"fields": …} shape for the predicate, which no
// in-toto consumer understands; Marshal never does that, and Parse refuses a
// document carrying such keys.
//
// Marshal is deterministic: it encodes with protojson and then re-encodes the
// result through encoding/json into compact JSON with object keys sorted and
// numbers kept as written, because protojson itself does not promise stable
// bytes (it may vary whitespace between runs and versions). Equal statements
// therefore give equal bytes, and so equal DSSE payload digests.
//
// What it is not: attest does not sign, wrap statements in DSSE envelopes or
// talk to a registry — package sign does that — and it does not decide whether
// a statement is acceptable (builder id, build type, required attestations);
// package policy does, reading predicates back through ProvenanceOf.
//
// TemplateBuild is a plain struct so that this package does not depend on
// package template; the release flow fills it from a build result.
package attest
