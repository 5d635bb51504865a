package sign

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verification reports the signatures that verified for one digest.
type Verification struct {
	// Ref is the image verified.
	Ref name.Digest
	// SignatureTag is where the signatures were read ("sha256-<hex>.sig").
	SignatureTag name.Tag
	// Signatures are the signatures that verified: key, and a payload that
	// names Ref's digest (and the annotations asked for, if any).
	Signatures []VerifiedSignature
	// Tlog names the transparency-log choice, e.g. "offline-no-tlog".
	Tlog string
}

// VerifiedSignature is one signature that passed every check.
type VerifiedSignature struct {
	// Source says where the signature was stored: SourceTag (the .sig
	// tag) or SourceBundle (a Sigstore bundle referrer).
	Source Source
	// Digest is, for SourceTag, the digest of the signed payload (the .sig
	// layer digest); for SourceBundle, the digest of the referrer manifest
	// holding the bundle.
	Digest v1.Hash
	// Payload is what was signed: for SourceTag the simple-signing
	// payload, for SourceBundle the in-toto statement (predicate type
	// https://sigstore.dev/cosign/sign/v1) naming the digest.
	Payload []byte
}

// Verify checks the cosign signatures of ref against v, as
// "cosign verify --key" does: at least one signature in ref's .sig tag must
// be valid for v and its payload must name ref's digest (the claim check
// cannot be turned off: without it a signature made for one digest, copied
// to another's tag, would verify). It refuses to run without a
// transparency-log choice; with WithOfflineNoTlog it makes no call but to
// the registry.
//
// The tag is read first, as it is the cheaper read. Only when it yields no
// signature that verifies does Verify list ref's referrers and verify the
// Sigstore signature bundles among them ("cosign sign
// --new-bundle-format"): DSSE signature by v, a statement of predicate type
// https://sigstore.dev/cosign/sign/v1 whose subject carries ref's digest.
// With WithAnnotations it does not look at bundles, which carry none. With
// WithBundle it reads both and requires a bundle that verifies. Each
// VerifiedSignature says its Source.
func Verify(ctx context.Context, ref name.Digest, v signature.Verifier, opts ...Option) (*Verification, error) {
	o, err := begin(ref, v == nil, "verifier", opts)
	if err != nil {
		return nil, err
	}
	return verify(ctx, ref, v, o)
}

func verify(ctx context.Context, ref name.Digest, v signature.Verifier, o *options) (*Verification, error) {
	if err := o.bundleWithoutAnnotations(); err != nil {
		return nil, err
	}
	out, tagErr := verifyTag(ctx, ref, v, o)
	switch {
	case tagErr != nil && !errors.Is(tagErr, ErrVerification):
		return nil, tagErr
	case tagErr == nil && !o.bundle:
		return out, nil
	case tagErr != nil && len(o.annotations) > 0:
		return nil, tagErr
	}
	tag, err := ociremote.SignatureTag(ref, o.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("%w: signature tag for %s: %w", ErrInput, ref, err)
	}
	set, err := verifyBundles(ctx, ref, v, o, bundleSignatures)
	if err != nil {
		return nil, err
	}
	if len(set.ok) == 0 {
		return nil, bundleRefusal(ref, tag, bundleSignatures, ErrNoSignatures, tagErr, errors.Is(tagErr, ErrNoSignatures), set, o.bundle)
	}
	if out == nil {
		out = &Verification{Ref: ref, SignatureTag: tag, Tlog: o.tlog.String()}
	}
	for _, b := range set.ok {
		out.Signatures = append(out.Signatures, VerifiedSignature{Source: SourceBundle, Digest: b.referrer, Payload: b.payload})
	}
	return out, nil
}

// verifyTag verifies the signatures at ref's .sig tag only.
func verifyTag(ctx context.Context, ref name.Digest, v signature.Verifier, o *options) (*Verification, error) {
	if o.tlog != tlogOfflineNone {
		// Only one mode exists today; a new one must be wired here on purpose.
		return nil, ErrTlogChoice
	}
	ropts := o.remote(ctx)
	tag, err := ociremote.SignatureTag(ref, ropts...)
	if err != nil {
		return nil, fmt.Errorf("%w: signature tag for %s: %w", ErrInput, ref, err)
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: ropts,
		SigVerifier:        v,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		Annotations:        o.annotations,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		Offline:            true,
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, ref, co)
	if err != nil {
		var none *cosign.ErrNoSignaturesFound
		var nomatch *cosign.ErrNoMatchingSignatures
		switch {
		case errors.As(err, &none):
			return nil, fmt.Errorf("%w: %s has no signatures at %s", ErrNoSignatures, ref, tag)
		case errors.As(err, &nomatch):
			return nil, fmt.Errorf("%w: %s: no signature at %s is valid for this key and names this digest: %w", ErrVerification, ref, tag, err)
		default:
			return nil, fmt.Errorf("%w: verify %s: %w", ErrRegistry, ref, err)
		}
	}
	out := &Verification{Ref: ref, SignatureTag: tag, Tlog: o.tlog.String()}
	for _, s := range sigs {
		d, err := s.Digest()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: signature digest: %w", ErrVerification, ref, err)
		}
		p, err := s.Payload()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: signature payload: %w", ErrVerification, ref, err)
		}
		out.Signatures = append(out.Signatures, VerifiedSignature{Source: SourceTag, Digest: d, Payload: p})
	}
	if len(out.Signatures) == 0 {
		return nil, fmt.Errorf("%w: %s has no signatures at %s", ErrNoSignatures, ref, tag)
	}
	return out, nil
}
