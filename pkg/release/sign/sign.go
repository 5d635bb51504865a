package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Status says what Sign did to the registry.
type Status string

const (
	// Created: the signature was appended to the signature tag.
	Created Status = "created"
	// Unchanged: an identical payload signed by the same key was already
	// attached; nothing was written.
	Unchanged Status = "unchanged"
)

// Result reports one signing.
type Result struct {
	// Ref is the image that was signed.
	Ref name.Digest
	// SignatureTag is where the signature lives ("sha256-<hex>.sig").
	SignatureTag name.Tag
	// Payload is the simple-signing payload that was signed.
	Payload []byte
	// Status is Created or Unchanged.
	Status Status
	// Tlog names the transparency-log choice, e.g. "offline-no-tlog".
	Tlog string
	// Verified is true once Sign has read the signature back from the
	// registry and verified it, claim included (and the bundle too, with
	// WithBundle); Sign never returns a Result with Verified false.
	Verified bool
	// Bundle reports the Sigstore bundle stored as a referrer; nil without
	// WithBundle.
	Bundle *BundleResult
}

// ParseDigest parses an image reference that must carry a digest
// ("registry/repo@sha256:<hex>", a tag beside the digest is ignored). A
// tag-only reference is refused: what is signed and verified is always a
// digest, never what a tag points at today.
func ParseDigest(s string) (name.Digest, error) {
	d, err := name.NewDigest(s)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%w: reference %q is not a digest reference (repo@sha256:...): %w", ErrInput, s, err)
	}
	return d, nil
}

// begin checks what every call needs before any work: a digest reference,
// a key (noKey names what is missing) and a transparency-log choice.
func begin(ref name.Digest, noKey bool, key string, opts []Option) (*options, error) {
	if err := checkDigest(ref); err != nil {
		return nil, err
	}
	if noKey {
		return nil, fmt.Errorf("%w: nil %s", ErrInput, key)
	}
	return makeOptions(opts)
}

func checkDigest(ref name.Digest) error {
	if ref.DigestStr() == "" || ref.Context().RepositoryStr() == "" {
		return fmt.Errorf("%w: reference %q is not a digest reference", ErrInput, ref.String())
	}
	return nil
}

// Sign signs the image ref with sv the way "cosign sign --key" does: a
// simple-signing payload naming ref's repository and digest, signed, and
// appended to the image at ref's "sha256-<hex>.sig" tag. It refuses to run
// without a transparency-log choice (WithOfflineNoTlog), does not sign again
// what is already signed identically by the same key, and verifies the
// signature it reads back from the registry before returning.
//
// With WithBundle it then also stores the signature as a Sigstore bundle
// referrer of ref, as "cosign sign --new-bundle-format --key" does: an
// in-toto statement naming the digest, predicate type
// https://sigstore.dev/cosign/sign/v1, in a DSSE envelope.
//
// The .sig tag is read, appended to and written back. Signers in one process
// are serialised per tag; a signer racing a writer in another process finds
// its signature missing on read-back and appends it again (up to 3 times).
func Sign(ctx context.Context, ref name.Digest, sv signature.SignerVerifier, opts ...Option) (*Result, error) {
	o, err := begin(ref, sv == nil, "signer", opts)
	if err != nil {
		return nil, err
	}
	if err := o.bundleWithoutAnnotations(); err != nil {
		return nil, err
	}
	ropts := o.remote(ctx)

	pl, err := (&payload.Cosign{Image: ref, Annotations: o.annotations}).MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: payload for %s: %w", ErrInput, ref, err)
	}
	raw, err := sv.SignMessage(bytes.NewReader(pl), sigopts.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sign: sign payload for %s: %w", ref, err)
	}
	sig, err := static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		return nil, fmt.Errorf("sign: signature layer for %s: %w", ref, err)
	}
	want, err := sig.Digest()
	if err != nil {
		return nil, fmt.Errorf("sign: signature layer for %s: %w", ref, err)
	}
	tag, err := ociremote.SignatureTag(ref, ropts...)
	if err != nil {
		return nil, fmt.Errorf("%w: signature tag for %s: %w", ErrInput, ref, err)
	}

	res := &Result{Ref: ref, SignatureTag: tag, Payload: pl, Status: Unchanged, Tlog: o.tlog.String()}
	// Check the signature before it leaves: key and claim, as Verify will.
	if err := checkOwnSignature(ctx, ref, sig, sv, o); err != nil {
		return nil, err
	}
	// Refuse to sign a digest the registry does not hold (asked while the
	// signature tag is read).
	exists := existsCheck(ctx, ref, o)
	var written v1.Hash
	unlock := tags.lock(tag.String())
	err = appendVerified(ctx, ref, tag, func() error {
		written = v1.Hash{}
		existing, err := ociremote.Signatures(tag, ropts...)
		if err := exists(); err != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("%w: read %s: %w", ErrRegistry, tag, err)
		}
		dup, err := cremote.NewDupeDetector(sv).Find(existing, sig)
		if err != nil {
			return fmt.Errorf("%w: read %s: %w", ErrRegistry, tag, err)
		}
		if dup != nil {
			return nil
		}
		// What "cosign sign" writes: the tag's image with one more layer.
		signed, err := mutate.AppendSignatures(existing, false, sig)
		if err != nil {
			return fmt.Errorf("sign: attach signature to %s: %w", ref, err)
		}
		if err := remote.Write(tag, signed, o.ggcr(ctx)...); err != nil {
			return fmt.Errorf("%w: write %s: %w", ErrRegistry, tag, err)
		}
		if written, err = signed.Digest(); err != nil {
			return err
		}
		res.Status = Created
		return nil
	}, func() (bool, error) {
		// The registry serves at the tag exactly the manifest written here
		// (whose signature was checked before writing)? Then it is there.
		if ok, err := tagHolds(ctx, tag, written, o); ok || err != nil {
			return ok, err
		}
		// Otherwise read back what the registry now holds, verify it, and
		// insist that the payload signed here is among the verified
		// signatures.
		ver, err := verifyTag(ctx, ref, sv, o)
		if err != nil {
			return false, err
		}
		for _, s := range ver.Signatures {
			if s.Digest == want {
				return true, nil
			}
		}
		return false, nil
	})
	unlock()
	if err != nil {
		return nil, err
	}
	if o.bundle {
		st, err := signStatement(ref)
		if err != nil {
			return nil, err
		}
		if res.Bundle, err = storeBundle(ctx, ref, sv, st, ctypes.CosignSignPredicateType, bundleSignatures, o); err != nil {
			return nil, err
		}
	}
	res.Verified = true
	return res, nil
}

// checkOwnSignature verifies a signature made here, before writing it, with
// the checks Verify makes (key, and a payload naming ref's digest).
func checkOwnSignature(ctx context.Context, ref name.Digest, sig oci.Signature, v signature.Verifier, o *options) error {
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInput, ref, err)
	}
	co := &cosign.CheckOpts{SigVerifier: v, ClaimVerifier: cosign.SimpleClaimVerifier, Annotations: o.annotations,
		IgnoreTlog: true, IgnoreSCT: true, Offline: true}
	if _, err := cosign.VerifyImageSignature(ctx, sig, h, co); err != nil {
		return fmt.Errorf("sign: self-check of %s: %w", ref, errors.Join(ErrVerification, err))
	}
	return nil
}

// existsCheck starts a HEAD of ref and returns a function that waits for
// its answer (the same answer on every call).
func existsCheck(ctx context.Context, ref name.Digest, o *options) func() error {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		if _, herr := remote.Head(ref, o.ggcr(ctx)...); herr != nil {
			err = fmt.Errorf("%w: read %s: %w", ErrRegistry, ref, herr)
		}
	}()
	return func() error { <-done; return err }
}

// tagHolds reports whether tag now names the manifest digest written (zero:
// nothing was written, so no).
func tagHolds(ctx context.Context, tag name.Tag, written v1.Hash, o *options) (bool, error) {
	if written == (v1.Hash{}) {
		return false, nil
	}
	desc, err := remote.Head(tag, o.ggcr(ctx)...)
	if err != nil {
		return false, fmt.Errorf("%w: read back %s: %w", ErrRegistry, tag, err)
	}
	return desc.Digest == written, nil
}

// maxAppends bounds how often a writer re-appends an entry that a writer in
// another process overwrote between its read and its write.
const maxAppends = 3

// appendVerified runs write (read the tag, append if missing, write it
// back) and then check (read back and verify that this writer's entry is
// there). If the entry is missing, another process rewrote the tag (or the
// referrers fallback index) in between: write again, up to maxAppends
// times. Check errors that
// are verification failures count as "missing"; registry errors end it.
func appendVerified(ctx context.Context, ref name.Digest, where fmt.Stringer, write func() error, check func() (bool, error)) error {
	for attempt := 1; ; attempt++ {
		if err := write(); err != nil {
			return err
		}
		ok, err := check()
		if err != nil && !errors.Is(err, ErrVerification) {
			return fmt.Errorf("sign: self-check of %s: %w", ref, err)
		}
		if ok {
			return nil
		}
		if attempt == maxAppends || ctx.Err() != nil {
			return fmt.Errorf("sign: self-check of %s: %w", ref, errors.Join(ErrVerification,
				fmt.Errorf("the entry written is not in %s after %d attempts (concurrent writers in other processes?)", where, attempt), err))
		}
	}
}
