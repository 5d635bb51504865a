// Package ref parses and normalises OCI image references and defines Pin, the
// record of a reference resolved to its immutable digest.
//
// Tags are names, digests are identities: a Reference keeps the tag and the
// digest apart (both may be present, as in "nginx:1.25@sha256:…"), and a Pin
// keeps the human tag beside the digest it resolved to, so that a pinned tree
// still says which release it came from while trusting only the digest.
//
// Parsing and normalisation (Docker Hub defaults, "library/", registry ports)
// come from go-containerregistry's name package; this package adds what that
// one drops: the tag beside a digest, and the spelling the user wrote, so that
// a rewrite changes nothing but what it must.
//
// It does no I/O. Resolving a tag to a digest is package resolve; finding and
// rewriting references in YAML is package pin.
package ref
