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
// The tags are read, appended to and written back. Writers in one process
// are serialised per tag; a writer racing another process finds its entry
// missing on read-back and appends again.
//
// It does not decide which keys may sign what, nor which attestations are
// required: that is package policy. Passwords never appear in errors.
package sign
