// Package generation defines the Generation document: an immutable,
// content-addressed set of pins for one pool, one pin per artifact kind,
// with a human sequence number, compatibility metadata, and a record of
// what was verified when it was created.
//
//	apiVersion: slipway.dev/v1alpha1
//	kind: Generation
//	id: g-<64 hex>
//	pool: agents
//	sequence: 3
//	pins:
//	  controlPlane:
//	    image: registry.example/cp:v1.4.0@sha256:<64 hex>
//	  policy:
//	    git: {repo: https://git.example/policies.git, commit: <40 hex>, ref: main}
//	  secretVersion:
//	    id: vault://kv/agents/token#7
//	compatibility:
//	  controlPlaneProtocol: {min: 3, max: 4}
//	  runnerProtocol: {min: 2, max: 2}
//	verification:
//	  policy: {name: demo, digest: sha256:<hex of the policy file>}
//	  verifiedAt: 2026-11-29T12:00:00Z
//	  artifacts:
//	    - kind: controlPlane
//	      digest: sha256:<64 hex>
//	      signatures: [sha256:<64 hex>]
//	      attestations: [{predicateType: https://slsa.dev/provenance/v1, digest: sha256:<64 hex>}]
//
// # Pins
//
// The kinds are controlPlane, runner, workspaceTemplate, nodeImage,
// runtimeClass, policy, model, promptBundle and secretVersion (Kinds;
// ArtifactKind gives a verification policy's spelling, "workspace-template").
// A pin is exactly one of:
//
//   - image: an OCI reference with a sha256 digest, written in canonical
//     form (registry/repository[:tag]@sha256:<hex>, as ref.Reference.Canonical
//     gives it); the tag is kept for humans and never trusted. Required for
//     controlPlane, runner and workspaceTemplate; allowed for nodeImage,
//     model and promptBundle.
//   - git: {repo, commit, ref}: a full lower-case hex commit id (40 or 64
//     digits), the ref it came from for humans. Required for policy.
//   - id: an opaque immutable id (an AMI id, a runtime class revision, a
//     model hash, a secret's path and version: never a secret value), with
//     optional human labels name and tag. Required for runtimeClass and
//     secretVersion; allowed for nodeImage, model and promptBundle.
//
// A secret version's version is part of its id ("vault://kv/agents/token#3"),
// never a tag: ParsePin reads a command line's KIND=VALUE that way.
//
// A tag, a reference without digest, a branch instead of a commit, an
// unknown kind or field, and two identities in one pin are refused.
// Validate also refuses a generation missing a kind its pool requires.
//
// # Identity
//
// The id is "g-" followed by the lower-case hex sha256 of the RFC 8785
// (JCS) canonical JSON of the pool, the pins and the compatibility, and of
// nothing else (Canonical returns those bytes):
//
//	{"compatibility":{"controlPlaneProtocol":{"max":4,"min":3},"runnerProtocol":{"max":2,"min":2}},
//	 "pins":{"<kind>":<pin>,...},"pool":"agents"}
//
// (shown on two lines; the canonical form has no white space) where each
// <pin> is one of
//
//	{"image":"<canonical reference>"}
//	{"git":{"commit":"<hex>","ref":"<ref>","repo":"<repo>"}}
//	{"id":"<id>","name":"<name>","tag":"<tag>"}
//
// with empty members (ref, name, tag) left out, keys in JCS order (by
// UTF-16 code units), integers as plain decimals, and strings escaped as
// JCS says (only '"', '\' and control characters). The same content always
// gives the same id; any change, a human tag included, gives a new one.
// sequence, verification and id itself are not hashed. Parse refuses a
// document whose id is not the id of its content: a generation is never
// edited, a change is a new generation (New). Because only one spelling of
// an image reference or a commit is accepted, equal content has one
// encoding.
//
// # What it is not
//
// The package does no I/O beyond Load reading a file. It does not resolve
// tags (package resolve), verify signatures (package policy; the caller
// records the outcome in Verification), or store generations in the config
// repository. A Verification is a record of what was checked, not a proof:
// the id does not cover it, and whoever relies on the pins verifies them
// again. New refuses only a result equal to the generation it starts from;
// content equal to an older generation has that generation's id, and
// finding it (for a rollback) is the caller's look-up.
package generation
