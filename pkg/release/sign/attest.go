package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"

	"golang.org/x/sync/errgroup"

	"github.com/slipway-dev/slipway/pkg/release/attest"
)

// ErrNoAttestations marks a digest with no attestations at all.
var ErrNoAttestations = fmt.Errorf("%w: no attestations", ErrVerification)

// AttestResult reports one attestation.
type AttestResult struct {
	// Ref is the image the statement is about.
	Ref name.Digest
	// AttestationTag is where the attestation lives ("sha256-<hex>.att").
	AttestationTag name.Tag
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Envelope is the DSSE envelope (JSON) that was attached, or that was
	// already attached when Status is Unchanged.
	Envelope []byte
	// Status is Created or Unchanged.
	Status Status
	// Tlog names the transparency-log choice, e.g. "offline-no-tlog".
	Tlog string
	// Verified is true once Attest has read the attestation back from the
	// registry and verified it (and the bundle too, with WithBundle);
	// Attest never returns it false.
	Verified bool
	// Bundle reports the Sigstore bundle stored as a referrer; nil without
	// WithBundle.
	Bundle *BundleResult
}

// Attest signs an in-toto Statement v1 about ref as a DSSE envelope
// (payload type application/vnd.in-toto+json) and attaches it to ref's
// "sha256-<hex>.att" tag, as "cosign attest --key" does, so
// "cosign verify-attestation" accepts it.
//
// statement must be the statement's JSON as attest.Marshal writes it
// (protojson names); it must parse as a valid Statement v1 and one of its
// subjects must carry ref's sha256 digest: a statement about another artifact
// is refused, not attached. An identical statement already attached and
// verifiable with sv's key is not attached again (Status Unchanged). Like
// Sign, it needs a transparency-log choice and checks its own output.
//
// With WithBundle it then also stores the statement as a Sigstore bundle
// referrer of ref, as "cosign attest --new-bundle-format --key" does.
func Attest(ctx context.Context, ref name.Digest, sv signature.SignerVerifier, statement []byte, opts ...Option) (*AttestResult, error) {
	res, err := AttestAll(ctx, ref, sv, [][]byte{statement}, opts...)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// pendingAttestation is one statement on its way to the .att tag.
type pendingAttestation struct {
	statement []byte
	st        *intoto.Statement
	layer     oci.Signature
	want      v1.Hash
	res       *AttestResult
}

// AttestAll is Attest for several statements about ref: the ones not
// already attached are appended in one write of the .att tag, read back
// and verified once. Results are in the order of statements.
func AttestAll(ctx context.Context, ref name.Digest, sv signature.SignerVerifier, statements [][]byte, opts ...Option) ([]*AttestResult, error) {
	o, err := begin(ref, sv == nil, "signer", opts)
	if err != nil {
		return nil, err
	}
	if len(statements) == 0 {
		return nil, fmt.Errorf("%w: no statements", ErrInput)
	}
	tag, err := ociremote.AttestationTag(ref, o.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("%w: attestation tag for %s: %w", ErrInput, ref, err)
	}
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInput, ref, err)
	}
	pending := make([]*pendingAttestation, len(statements))
	for i, statement := range statements {
		st, err := attest.Parse(statement)
		if err != nil {
			return nil, fmt.Errorf("%w: statement for %s: %w", ErrInput, ref, err)
		}
		if !namesDigest(st, ref) {
			return nil, fmt.Errorf("%w: statement (%s) has no subject with digest %s", ErrInput, st.GetPredicateType(), ref.DigestStr())
		}
		env, err := dsse.WrapSigner(sv, ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(statement), sigopts.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("sign: sign statement for %s: %w", ref, err)
		}
		layer, err := static.NewAttestation(env,
			static.WithLayerMediaType(ctypes.DssePayloadType),
			static.WithAnnotations(map[string]string{"predicateType": st.GetPredicateType()}))
		if err != nil {
			return nil, fmt.Errorf("sign: attestation layer for %s: %w", ref, err)
		}
		// Check it before it leaves, as VerifyAttestations will.
		if _, err := verifyAttestation(ctx, layer, h, &cosign.CheckOpts{SigVerifier: sv, ClaimVerifier: cosign.IntotoSubjectClaimVerifier,
			IgnoreTlog: true, IgnoreSCT: true, Offline: true}); err != nil {
			return nil, fmt.Errorf("sign: self-check of %s: %w", ref, errors.Join(ErrVerification, err))
		}
		pending[i] = &pendingAttestation{statement: statement, st: st, layer: layer,
			res: &AttestResult{Ref: ref, AttestationTag: tag, PredicateType: st.GetPredicateType(), Envelope: env, Status: Unchanged, Tlog: o.tlog.String()}}
	}
	// Refuse to attest a digest the registry does not hold (asked while the
	// attestation tag is read).
	exists := existsCheck(ctx, ref, o)
	var written v1.Hash

	unlock := tags.lock(tag.String())
	err = appendVerified(ctx, ref, tag, func() error {
		// A DSSE signature is not deterministic, so "already attached" means
		// a verified attestation by this key carrying the same statement.
		written = v1.Hash{}
		have, existing, err := tagAttestationsRaw(ctx, ref, sv, o)
		if err := exists(); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		var add []oci.Signature
		for _, p := range pending {
			found := false
			for _, a := range have.Attestations {
				if bytes.Equal(a.Payload, p.statement) {
					p.res.Envelope, p.want, found = a.Envelope, a.Digest, true
					break
				}
			}
			if !found {
				if p.want, err = p.layer.Digest(); err != nil {
					return err
				}
				add = append(add, p.layer)
				p.res.Status = Created
			}
		}
		if len(add) == 0 {
			return nil
		}
		// What "cosign attest" writes: the tag's image with more layers.
		withAtt, err := mutate.AppendSignatures(existing, false, add...)
		if err != nil {
			return fmt.Errorf("sign: attach attestations to %s: %w", ref, err)
		}
		if err := remote.Write(tag, withAtt, o.ggcr(ctx)...); err != nil {
			return fmt.Errorf("%w: write %s: %w", ErrRegistry, tag, err)
		}
		written, err = withAtt.Digest()
		return err
	}, func() (bool, error) {
		// The tag serves exactly what was written (checked before
		// writing)? Otherwise read it back and verify.
		if ok, err := tagHolds(ctx, tag, written, o); ok || err != nil {
			return ok, err
		}
		ver, _, err := tagAttestations(ctx, ref, sv, o)
		if err != nil {
			return false, err
		}
		for _, p := range pending {
			found := false
			for _, a := range ver.Attestations {
				if a.Digest == p.want {
					found = true
					break
				}
			}
			if !found {
				return false, nil
			}
		}
		return true, nil
	})
	unlock()
	if err != nil {
		return nil, err
	}
	out := make([]*AttestResult, len(pending))
	for i, p := range pending {
		if o.bundle {
			if p.res.Bundle, err = storeBundle(ctx, ref, sv, p.statement, p.st.GetPredicateType(), bundleAttestations, o); err != nil {
				return nil, err
			}
		}
		p.res.Verified = true
		out[i] = p.res
	}
	return out, nil
}

// SignAndAttest signs ref and attaches statements, concurrently (the
// signature and the attestations live in different tags) and over one
// registry session: what a release step does after publishing. It is Sign
// and AttestAll, with their checks.
func SignAndAttest(ctx context.Context, ref name.Digest, sv signature.SignerVerifier, statements [][]byte, opts ...Option) (*Result, []*AttestResult, error) {
	o, err := parseOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	shared := opts
	if o.session == nil {
		s, err := newSession(o)
		if err != nil {
			return nil, nil, err
		}
		shared = append(append([]Option(nil), opts...), WithSession(s))
	}
	var sres *Result
	var ares []*AttestResult
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { sres, err = Sign(gctx, ref, sv, shared...); return err })
	if len(statements) > 0 {
		g.Go(func() (err error) { ares, err = AttestAll(gctx, ref, sv, statements, shared...); return err })
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return sres, ares, nil
}

// namesDigest reports whether one of st's subjects carries ref's digest.
func namesDigest(st *intoto.Statement, ref name.Digest) bool {
	alg, hex, ok := strings.Cut(ref.DigestStr(), ":")
	if !ok {
		return false
	}
	for _, s := range st.GetSubject() {
		if s.GetDigest()[alg] == hex {
			return true
		}
	}
	return false
}

// AttestationVerification reports the attestations that verified for one
// digest.
type AttestationVerification struct {
	// Ref is the image verified.
	Ref name.Digest
	// AttestationTag is where the tag attestations were read; bundles are
	// read from the digest's referrers.
	AttestationTag name.Tag
	// Attestations verified: DSSE signature valid for the key, payload a
	// valid in-toto Statement v1 with a subject naming Ref's digest.
	Attestations []VerifiedAttestation
	// Rejected lists, one line each, why the other entries at the tag or
	// among the bundles did not verify (another key, a tampered payload,
	// another subject). It is empty when everything verified.
	Rejected []string
	// Tlog names the transparency-log choice.
	Tlog string
}

// VerifiedAttestation is one attestation that passed every check.
type VerifiedAttestation struct {
	// Source says where the attestation was stored: SourceTag (the .att
	// tag) or SourceBundle (a Sigstore bundle referrer).
	Source Source
	// Digest is, for SourceTag, the digest of the attestation layer (the
	// envelope); for SourceBundle, the digest of the referrer manifest
	// holding the bundle.
	Digest v1.Hash
	// PredicateType is the statement's predicate type.
	PredicateType string
	// Payload is the statement exactly as signed.
	Payload []byte
	// Statement is Payload parsed.
	Statement *intoto.Statement
	// Envelope is the DSSE envelope: as stored for SourceTag, taken out of
	// the bundle (JSON, payload base64) for SourceBundle.
	Envelope []byte
}

// Predicate returns the verified attestations whose predicate type is t.
func (v *AttestationVerification) Predicate(t string) []VerifiedAttestation {
	var out []VerifiedAttestation
	for _, a := range v.Attestations {
		if a.PredicateType == t {
			out = append(out, a)
		}
	}
	return out
}

// VerifyAttestations verifies the attestations at ref's ".att" tag against
// v, as "cosign verify-attestation --key" does: the DSSE signature must be
// valid for the key, and the statement's subjects must name ref's digest.
// It also requires the statement to be a valid in-toto Statement v1 with
// JSON (protojson) field names. It returns every attestation that passed
// (any predicate type; choose with Predicate) and, in Rejected, why the
// others did not. No attestation at all is ErrNoAttestations; none that
// verifies is ErrVerification.
//
// It also lists ref's referrers and verifies the Sigstore attestation
// bundles among them ("cosign attest --new-bundle-format") with the same
// checks; each VerifiedAttestation says its Source. Unlike Verify, it
// reads the bundles even when the tag verified: callers choose by
// predicate type after the call, so "the tag holds a valid provenance"
// says nothing about an SBOM that exists only as a bundle. With WithBundle
// at least one bundle must verify.
func VerifyAttestations(ctx context.Context, ref name.Digest, v signature.Verifier, opts ...Option) (*AttestationVerification, error) {
	o, err := begin(ref, v == nil, "verifier", opts)
	if err != nil {
		return nil, err
	}
	return verifyAttestations(ctx, ref, v, o)
}

func verifyAttestations(ctx context.Context, ref name.Digest, v signature.Verifier, o *options) (*AttestationVerification, error) {
	out, n, err := tagAttestations(ctx, ref, v, o)
	if err != nil {
		return nil, err
	}
	var tagErr error
	switch {
	case n == 0:
		tagErr = fmt.Errorf("%w: %s has no attestations at %s", ErrNoAttestations, ref, out.AttestationTag)
	case len(out.Attestations) == 0:
		tagErr = fmt.Errorf("%w: %s: no attestation at %s is valid for this key and names this digest: %s",
			ErrVerification, ref, out.AttestationTag, strings.Join(out.Rejected, "; "))
	}
	set, err := verifyBundles(ctx, ref, v, o, bundleAttestations)
	if err != nil {
		return nil, err
	}
	if len(set.ok) == 0 && (tagErr != nil || o.bundle) {
		return nil, bundleRefusal(ref, out.AttestationTag, bundleAttestations, ErrNoAttestations, tagErr, n == 0, set, o.bundle)
	}
	for _, b := range set.ok {
		out.Attestations = append(out.Attestations, VerifiedAttestation{
			Source: SourceBundle, Digest: b.referrer, PredicateType: b.statement.GetPredicateType(),
			Payload: b.payload, Statement: b.statement, Envelope: b.envelope,
		})
	}
	out.Rejected = append(out.Rejected, set.rejected...)
	return out, nil
}

// tagAttestations verifies the attestations at ref's .att tag only. It
// returns those that verified, why the others did not, and how many there
// were; the error is for input and registry failures only.
func tagAttestations(ctx context.Context, ref name.Digest, v signature.Verifier, o *options) (*AttestationVerification, int, error) {
	out, sigs, err := tagAttestationsRaw(ctx, ref, v, o)
	if err != nil {
		return nil, 0, err
	}
	all, err := sigs.Get()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: read %s: %w", ErrRegistry, out.AttestationTag, err)
	}
	return out, len(all), nil
}

// tagAttestationsRaw is tagAttestations returning the tag's content as read
// (to append to without reading it again).
func tagAttestationsRaw(ctx context.Context, ref name.Digest, v signature.Verifier, o *options) (*AttestationVerification, oci.Signatures, error) {
	if o.tlog != tlogOfflineNone {
		return nil, nil, ErrTlogChoice
	}
	ropts := o.remote(ctx)
	tag, err := ociremote.AttestationTag(ref, ropts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: attestation tag for %s: %w", ErrInput, ref, err)
	}
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInput, ref, err)
	}
	sigs, err := ociremote.Signatures(tag, ropts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %w", ErrRegistry, tag, err)
	}
	all, err := sigs.Get()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: read %s: %w", ErrRegistry, tag, err)
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: ropts,
		SigVerifier:        v,
		ClaimVerifier:      cosign.IntotoSubjectClaimVerifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		Offline:            true,
	}
	out := &AttestationVerification{Ref: ref, AttestationTag: tag, Tlog: o.tlog.String()}
	// One by one rather than cosign's batch call, so that each rejection
	// keeps its own reason.
	for i, s := range all {
		a, err := verifyAttestation(ctx, s, h, co)
		if err != nil {
			d, _ := s.Digest()
			out.Rejected = append(out.Rejected, fmt.Sprintf("attestation %d (%s) at %s: %v", i+1, d, tag, err))
			continue
		}
		out.Attestations = append(out.Attestations, a)
	}
	return out, sigs, nil
}

// verifyAttestation checks one attestation layer: signature, subject claim
// and a well-formed statement.
func verifyAttestation(ctx context.Context, s oci.Signature, h v1.Hash, co *cosign.CheckOpts) (VerifiedAttestation, error) {
	one := &singleSignature{sig: s}
	if _, _, err := cosign.VerifyImageAttestation(ctx, one, h, co); err != nil {
		var nm *cosign.ErrNoMatchingAttestations
		if errors.As(err, &nm) {
			// cosign prefixes its reason; keep only the reason.
			return VerifiedAttestation{}, errors.New(strings.TrimPrefix(nm.Error(), "no matching attestations: "))
		}
		return VerifiedAttestation{}, err
	}
	env, err := s.Payload()
	if err != nil {
		return VerifiedAttestation{}, err
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		return VerifiedAttestation{}, fmt.Errorf("envelope: %w", err)
	}
	if e.PayloadType != ctypes.IntotoPayloadType {
		return VerifiedAttestation{}, fmt.Errorf("envelope payload type %q, want %q", e.PayloadType, ctypes.IntotoPayloadType)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return VerifiedAttestation{}, fmt.Errorf("envelope payload: %w", err)
	}
	st, err := attest.Parse(payload)
	if err != nil {
		return VerifiedAttestation{}, err
	}
	d, err := s.Digest()
	if err != nil {
		return VerifiedAttestation{}, err
	}
	return VerifiedAttestation{Source: SourceTag, Digest: d, PredicateType: st.GetPredicateType(), Payload: payload, Statement: st, Envelope: env}, nil
}

// singleSignature is an oci.Signatures of one entry, so cosign's checks run
// on each attestation separately.
type singleSignature struct {
	oci.Signatures
	sig oci.Signature
}

func (s *singleSignature) Get() ([]oci.Signature, error) { return []oci.Signature{s.sig}, nil }
