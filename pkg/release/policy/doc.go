// Package policy decides whether an artifact may be promoted, rendered or
// run: a VerificationPolicy document (apiVersion slipway.dev/v1alpha1) says
// which keys may sign which artifact kinds and repositories, which
// attestations are required (SLSA provenance from a given builder and build
// type, an SBOM of either format, any predicate type), and whether mutable
// references are ever allowed (by default they are not).
//
// Load parses a policy strictly and refuses what is unsafe or unclear, with
// file:line: unknown fields, unknown keys or kinds, a rule that requires
// nothing unless it says allowUnverified, and a policy with no rules. The
// transparency-log mode must be written out; "none" (offline, keys only) is
// the only one reachable here.
//
// Verify checks one target, always by digest, and returns a Result: every
// check with pass or fail and a reason naming the digest, so a refusal says
// exactly what is missing. Every rule that matches a target applies; a
// target no rule matches is refused. Refusals are results, not errors;
// the error is for verification that could not run (registry unreachable).
//
// Signatures and attestations are checked with package sign; statements are
// read with package attest.
//
// It signs nothing and writes nothing to a registry (package sign does),
// and it does not decide what a refusal stops: promotion, rendering and
// the runtime, its callers, do.
package policy
