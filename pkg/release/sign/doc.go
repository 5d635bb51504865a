// Package sign signs container images by digest with a cosign key pair and
// verifies those signatures, on the cosign v2 library (never the cosign CLI).
//
// Signatures are stored the way cosign stores them: a simple-signing payload
// naming the image digest, signed with the key, appended as a layer to the
// image tagged "sha256-<hex>.sig" in the image's repository. What Slipway
// signs, "cosign verify --key" verifies, and the other way round.
//
// GenerateKeys makes a cosign-compatible, password-encrypted key pair;
// LoadSigner and LoadVerifier read one. Sign refuses anything but a digest
// reference, is repeat-safe (an identical signature already attached is
// reported Unchanged and nothing is written), and verifies its own output
// before it returns. Verify always checks that the signed payload names the
// digest being verified, so a signature made for one digest and copied to
// another digest's signature tag is refused.
//
// Transparency logs and keyless (Fulcio) signing are not reachable here. They
// are the pluggable path for later; until then Sign and Verify refuse to run
// unless the caller chooses WithOfflineNoTlog, so working without a
// transparency log is always a visible, spelled-out decision and never a
// silent default. Nothing in this package contacts anything but the registry.
//
// Attest attaches an in-toto statement (made by package attest) the way
// "cosign attest" does: a DSSE envelope, payload type
// application/vnd.in-toto+json, appended to the "sha256-<hex>.att" tag.
// VerifyAttestations checks each envelope's signature, that the statement's
// subject names the digest, and that the statement is well formed, and says
// why each rejected entry was rejected.
//
// WithBundle adds the format the ecosystem is moving to: a Sigstore bundle
// v0.3 (DSSE envelope, the key's hint, no transparency-log entry) stored as
// an OCI referrer of the digest, as "cosign sign/attest --new-bundle-format
// --key" writes it; the classic tags are still written. Registries with the
// OCI 1.1 referrers API list the referrer themselves; on those without it
// (Debian's docker-registry 2.8) go-containerregistry keeps the referrers
// tag schema's index, the tag "sha256-<hex>". Verify reads bundles when the
// .sig tag yields no valid signature; VerifyAttestations always reads them
// beside the .att tag. Bundles get the same checks as tags (key, subject
// digest, well-formed statement) and every verified entry says its Source.
// What Sign and Attest write as bundles, "cosign verify --new-bundle-format"
// and "cosign verify-attestation --new-bundle-format" accept (with --key,
// --insecure-ignore-tlog and a --trusted-root, which may be empty).
//
// The tags, and the referrers index where the registry has no referrers
// API, are read, appended to and written back, with no conditional request
// to make that atomic. Writers in one process are serialised per tag (per
// digest for referrers); a writer racing another process finds its entry
// missing on read-back and writes again. That narrows the race but cannot
// close it: a writer in another process that read the index before this
// writer's entry landed and writes it back after this writer's read-back
// still drops the entry. Only the referrers API (or one writer per digest)
// closes it.
//
// It does not decide which keys may sign what, nor which attestations are
// required: that is package policy. Passwords never appear in errors.
package sign
