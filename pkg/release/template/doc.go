// Package template builds workspace templates as release artifacts: a
// declarative spec (templates/<name>/template.yaml) becomes a frozen,
// reproducible OCI image published by digest, with its scrub and scan
// reports and its smoke tests.
//
// The recipe: start from a base pinned by digest; run copy and run steps in
// an isolated build sandbox (package isolate) on the unpacked rootfs (package
// rootfs); remove build credentials and transient files and scan for secrets
// (package scan) — a finding refuses the freeze; freeze the change over the
// base into deterministic layers with a canonical config; run the smoke tests
// in a fresh sandbox of the frozen tree; publish to a registry or an OCI
// layout. Same inputs, same digest, on any machine.
//
// It does not sign or attest (package sign, package attest), and it does not
// decide which template a pool uses (package generation).
package template
