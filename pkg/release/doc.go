// Package release chains the verbs into the flows a release engineer runs,
// so that cmd/ stays a thin shell and no verb package imports another's
// flow: a template is built, tested and frozen (package template), its
// SBOMs made (package sbom), and the image published, as one step
// (BuildTemplate); the published template signed and its SBOMs and
// provenance attached as attestations (SignTemplate, package sign); a
// generation created from pins that the verification policy accepts
// (CreateGeneration, VerifyPins); a generation promoted into the config
// repository (Promote); and a pool's settings read and changed there
// (ShowPool, SetPool).
//
// It owns no concept of its own beyond the order of the steps.
package release
