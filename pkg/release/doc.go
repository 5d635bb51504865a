// Package release chains the verbs into the flows a release engineer runs:
// a template is built, tested and frozen (package template), its SBOMs made
// (package sbom), and the image published, as one step; later issues add
// signing and attestation, generations and promotion here, so that cmd/
// stays a thin shell and no verb package imports another's flow.
//
// It owns no concept of its own beyond the order of the steps.
package release
