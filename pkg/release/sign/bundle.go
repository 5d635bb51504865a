package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slipway-dev/slipway/pkg/release/attest"
)

// Source says where a verified signature or attestation was stored.
type Source string

const (
	// SourceTag: cosign's classic tag, "sha256-<hex>.sig" or ".att".
	SourceTag Source = "tag"
	// SourceBundle: a Sigstore bundle v0.3 in an OCI referrer of the digest.
	SourceBundle Source = "bundle"
)

// BundleResult reports the Sigstore bundle that Sign or Attest stored with
// WithBundle.
type BundleResult struct {
	// Referrer is the digest of the referrer manifest (subject: the signed
	// digest) whose one layer is the bundle.
	Referrer v1.Hash
	// Status is Created, or Unchanged when an equivalent bundle by the same
	// key was already there and nothing was written.
	Status Status
	// Bundle is the bundle read back and verified (protojson).
	Bundle []byte
}

// bundleKind separates the bundles cosign writes for "sign" (predicate type
// https://sigstore.dev/cosign/sign/v1) from those it writes for "attest":
// both are DSSE-wrapped in-toto statements in the same kind of referrer.
type bundleKind int

const (
	bundleSignatures bundleKind = iota
	bundleAttestations
)

func (k bundleKind) String() string {
	if k == bundleSignatures {
		return "signature"
	}
	return "attestation"
}

// wants reports whether a statement of predicate type t is of kind k.
func (k bundleKind) wants(t string) bool {
	return (t == ctypes.CosignSignPredicateType) == (k == bundleSignatures)
}

// Annotations cosign's WriteAttestationNewBundleFormat puts on the referrer
// manifest (storeBundle writes the same). They are not signed: they only spare fetching bundles of the
// other kind, never decide that a bundle is valid.
const (
	annotationBundleContent       = "dev.sigstore.bundle.content"
	annotationBundlePredicateType = "dev.sigstore.bundle.predicateType"
	bundleMediaTypePrefix         = "application/vnd.dev.sigstore.bundle"
)

// verifiedBundle is one bundle that passed every check.
type verifiedBundle struct {
	referrer  v1.Hash
	bundle    []byte // protojson
	envelope  []byte // the DSSE envelope as JSON (payload base64)
	payload   []byte // the in-toto statement as signed
	statement *intoto.Statement
	sig       []byte // the DSSE signature
}

// bundleSet is what verifyBundles found among the referrers.
type bundleSet struct {
	ok       []verifiedBundle
	rejected []string
}

// referrersOf names where bundles of a digest are listed, for messages and
// for the per-subject writer lock.
type referrersOf name.Digest

func (r referrersOf) String() string { return "the referrers of " + name.Digest(r).String() }

// signStatement is the statement "cosign sign --new-bundle-format" signs
// for an image: the digest as subject, cosign's sign predicate type, no
// predicate.
func signStatement(ref name.Digest) ([]byte, error) {
	alg, hx, ok := strings.Cut(ref.DigestStr(), ":")
	if !ok {
		return nil, fmt.Errorf("%w: reference %q is not a digest reference", ErrInput, ref)
	}
	return protojson.Marshal(&intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Digest: map[string]string{alg: hx}}},
		PredicateType: ctypes.CosignSignPredicateType,
	})
}

// storeBundle signs statement with sv as a DSSE envelope, wraps it in a
// Sigstore bundle v0.3 with the key's hint and no transparency-log entry
// (cbundle.MakeNewBundle, as "cosign attest --new-bundle-format --key
// --tlog-upload=false" does) and stores it as a referrer of ref, the
// manifest cosign's WriteAttestationNewBundleFormat writes. If a bundle of this kind that
// verifies with sv is already there (for attestations: carrying the same
// statement), it writes nothing and reports Unchanged.
//
// Writers of ref's referrers in this process are serialised. Where the
// registry has no referrers API, the fallback index "sha256-<hex>" is read,
// appended to and written back, so a writer in another process can drop
// this writer's entry: storeBundle reads the referrers back and stores the
// bundle again when its entry is missing (see appendVerified).
func storeBundle(ctx context.Context, ref name.Digest, sv signature.SignerVerifier, statement []byte, predicateType string, kind bundleKind, o *options) (*BundleResult, error) {
	where := referrersOf(ref)
	unlock := tags.lock(where.String())
	defer unlock()

	res := &BundleResult{Status: Unchanged}
	var mine []byte // the DSSE signature of the bundle written here
	match := func(b verifiedBundle) bool {
		switch {
		case mine != nil:
			return bytes.Equal(b.sig, mine)
		case kind == bundleSignatures:
			// Any signature bundle by this key for this digest says the
			// same thing, whatever its JSON spelling.
			return true
		default:
			return bytes.Equal(b.payload, statement)
		}
	}
	present := func() (bool, error) {
		set, err := verifyBundles(ctx, ref, sv, o, kind)
		if err != nil {
			return false, err
		}
		for _, b := range set.ok {
			if match(b) {
				res.Referrer, res.Bundle = b.referrer, b.bundle
				return true, nil
			}
		}
		return false, nil
	}
	ok, err := present()
	if err != nil {
		return nil, err
	}
	if ok {
		return res, nil
	}

	env, err := dsse.WrapSigner(sv, ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(statement), sigopts.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sign: sign bundle statement for %s: %w", ref, err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: public key of the signer: %w", ErrKey, err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: public key of the signer: %w", ErrKey, err)
	}
	raw, err := cbundle.MakeNewBundle(pub, nil, statement, env, pubPEM, nil)
	if err != nil {
		return nil, fmt.Errorf("sign: bundle for %s: %w", ref, err)
	}
	// The envelope's signature identifies this writer's bundle on read-back.
	var e struct {
		Signatures []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &e); err != nil || len(e.Signatures) != 1 {
		return nil, fmt.Errorf("sign: bundle for %s: unexpected DSSE envelope (%d signatures): %v", ref, len(e.Signatures), err)
	}
	if mine, err = base64.StdEncoding.DecodeString(e.Signatures[0].Sig); err != nil {
		return nil, fmt.Errorf("sign: bundle for %s: DSSE signature: %w", ref, err)
	}

	// The referrer cosign's WriteAttestationNewBundleFormat writes, with
	// its annotations fixed once here: cosign stamps every call with the
	// second it ran (org.opencontainers.image.created), so a write again
	// after a lost index entry would be a second manifest of the same
	// bundle whenever another writer's stale index brings the first entry
	// back. The same manifest on every attempt is held once by the index
	// (go-containerregistry adds a descriptor only when its digest is not
	// there yet).
	mediaType, err := sgbundle.MediaTypeString("0.3")
	if err != nil {
		return nil, fmt.Errorf("sign: bundle for %s: %w", ref, err)
	}
	annotations := map[string]string{
		"org.opencontainers.image.created": time.Now().UTC().Format(time.RFC3339),
		annotationBundleContent:            "dsse-envelope",
		annotationBundlePredicateType:      predicateType,
	}
	layer := static.NewLayer(raw, types.MediaType(mediaType))
	ropts := o.remote(ctx)
	err = appendVerified(ctx, ref, where, func() error {
		if err := ociremote.WriteReferrer(ref, mediaType, []v1.Layer{layer}, annotations, ropts...); err != nil {
			return fmt.Errorf("%w: write bundle referrer of %s: %w", ErrRegistry, ref, err)
		}
		res.Status = Created
		return nil
	}, present)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// verifyBundles lists ref's referrers (the OCI 1.1 API, or the referrers
// tag schema where the registry lacks it) and verifies every Sigstore bundle
// of kind among them against v with cosign's sigstore-go path: key-only, no
// transparency log, no timestamps, and sigstore-go's artifact-digest policy,
// which refuses a statement whose subjects do not carry ref's digest. Each
// statement must also pass attest.Parse. Referrers that are not Sigstore
// bundles are skipped; bundles of the other kind are skipped. The error is
// only for a registry that cannot be read.
func verifyBundles(ctx context.Context, ref name.Digest, v signature.Verifier, o *options, kind bundleKind) (*bundleSet, error) {
	if o.tlog != tlogOfflineNone {
		return nil, ErrTlogChoice
	}
	ropts := o.remote(ctx)
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInput, ref, err)
	}
	dg, err := hex.DecodeString(h.Hex)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInput, ref, err)
	}
	idx, err := ociremote.Referrers(ref, "", ropts...)
	if err != nil {
		return nil, fmt.Errorf("%w: list %s: %w", ErrRegistry, referrersOf(ref), err)
	}
	co := &cosign.CheckOpts{
		RegistryClientOpts: ropts,
		SigVerifier:        v,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		Offline:            true,
		NewBundleFormat:    true,
		// cosign requires trusted material for bundles. With a key and no
		// log, the key is all the trust there is: an empty set of
		// authorities, logs and CAs, and never cosign.TrustedRoot (TUF,
		// network).
		TrustedMaterial: &root.BaseTrustedMaterial{},
	}
	policy := sgverify.WithArtifactDigest(h.Algorithm, dg)

	set := &bundleSet{}
	for _, desc := range idx.Manifests {
		if t, ok := desc.Annotations[annotationBundlePredicateType]; ok && !kind.wants(t) {
			continue
		}
		b, err := ociremote.Bundle(ref.Context().Digest(desc.Digest.String()), ropts...)
		if err != nil {
			if registryFailure(ctx, err) {
				return nil, fmt.Errorf("%w: read referrer %s of %s: %w", ErrRegistry, desc.Digest, ref, err)
			}
			if looksLikeBundle(desc) {
				set.rejected = append(set.rejected, fmt.Sprintf("bundle %s: %v", desc.Digest, err))
			}
			continue
		}
		if t := unverifiedPredicateType(b); t != "" && !kind.wants(t) {
			continue
		}
		vb, err := verifyBundle(ctx, b, ref, kind, co, policy)
		if err != nil {
			set.rejected = append(set.rejected, fmt.Sprintf("bundle %s: %v", desc.Digest, err))
			continue
		}
		vb.referrer = desc.Digest
		set.ok = append(set.ok, vb)
	}
	return set, nil
}

// verifyBundle checks one bundle: signature by the key over a DSSE
// envelope whose in-toto statement names the digest, and a statement that
// is well formed and of kind.
func verifyBundle(ctx context.Context, b *sgbundle.Bundle, ref name.Digest, kind bundleKind, co *cosign.CheckOpts, policy sgverify.ArtifactPolicyOption) (verifiedBundle, error) {
	if _, err := cosign.VerifyNewBundle(ctx, co, policy, b); err != nil {
		return verifiedBundle{}, err
	}
	env := b.GetDsseEnvelope()
	if env == nil {
		return verifiedBundle{}, errors.New("bundle holds a message signature, not a DSSE envelope")
	}
	if env.GetPayloadType() != ctypes.IntotoPayloadType {
		return verifiedBundle{}, fmt.Errorf("envelope payload type %q, want %q", env.GetPayloadType(), ctypes.IntotoPayloadType)
	}
	st, err := parseStatement(kind, env.GetPayload())
	if err != nil {
		return verifiedBundle{}, err
	}
	if !kind.wants(st.GetPredicateType()) {
		return verifiedBundle{}, fmt.Errorf("predicate type %q is not a %s", st.GetPredicateType(), kind)
	}
	// sigstore-go's policy has checked this; the claim check must not
	// rest on one library's option.
	if !namesDigest(st, ref) {
		return verifiedBundle{}, fmt.Errorf("statement has no subject with digest %s", ref.DigestStr())
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return verifiedBundle{}, fmt.Errorf("envelope: %w", err)
	}
	raw, err := b.MarshalJSON()
	if err != nil {
		return verifiedBundle{}, fmt.Errorf("bundle: %w", err)
	}
	var sig []byte
	if ss := env.GetSignatures(); len(ss) > 0 {
		sig = ss[0].GetSig()
	}
	return verifiedBundle{bundle: raw, envelope: envJSON, payload: env.GetPayload(), statement: st, sig: sig}, nil
}

// parseStatement parses a bundle's statement with attest.Parse. cosign's
// signature statements have no predicate (in-toto v1 makes it optional;
// the Go library's Validate does not), so for signatures an absent
// predicate is read as the empty one and everything else is checked as
// for attestations.
func parseStatement(kind bundleKind, payload []byte) (*intoto.Statement, error) {
	st, err := attest.Parse(payload)
	if err == nil || kind != bundleSignatures || !errors.Is(err, intoto.ErrPredicateRequired) {
		return st, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", attest.ErrValidation, err)
	}
	top["predicate"] = json.RawMessage(`{}`)
	withEmpty, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("%w: statement: %w", attest.ErrValidation, err)
	}
	return attest.Parse(withEmpty)
}

// unverifiedPredicateType peeks at a bundle's statement, before any check,
// only to skip bundles of the other kind; "" when it cannot tell.
func unverifiedPredicateType(b *sgbundle.Bundle) string {
	env := b.GetDsseEnvelope()
	if env == nil {
		return ""
	}
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if json.Unmarshal(env.GetPayload(), &st) != nil {
		return ""
	}
	return st.PredicateType
}

// looksLikeBundle tells a referrer meant as a Sigstore bundle (whose
// failure to load is a rejection worth reporting) from other tools'
// referrers (skipped silently).
func looksLikeBundle(d v1.Descriptor) bool {
	_, ok := d.Annotations[annotationBundleContent]
	return ok || strings.HasPrefix(d.ArtifactType, bundleMediaTypePrefix)
}

// registryFailure tells a registry that cannot be read (an error to
// return) from a referrer that is gone or malformed (a rejection).
func registryFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		return terr.StatusCode != http.StatusNotFound
	}
	var uerr *url.Error
	return errors.As(err, &uerr)
}

// bundleRefusal is the error when the bundles of kind add nothing that
// verifies (or, with required, none at all). tagErr is the tag's refusal
// (nil when the tag verified) and tagEmpty whether the tag held no entries;
// none is ErrNoSignatures or ErrNoAttestations.
func bundleRefusal(ref name.Digest, tag name.Tag, kind bundleKind, none error, tagErr error, tagEmpty bool, set *bundleSet, required bool) error {
	switch {
	case len(set.rejected) == 0 && tagErr != nil && tagEmpty:
		return fmt.Errorf("%w: %s has no %ss at %s nor among its referrers", none, ref, kind, tag)
	case len(set.rejected) == 0 && tagErr != nil:
		return fmt.Errorf("%w; and there is no %s bundle among %s", tagErr, kind, referrersOf(ref))
	case len(set.rejected) == 0:
		return fmt.Errorf("%w: %s: there is no %s bundle among %s (WithBundle requires one)", ErrVerification, ref, kind, referrersOf(ref))
	}
	msg := fmt.Sprintf("no %s bundle among %s is valid for this key and names this digest: %s", kind, referrersOf(ref), strings.Join(set.rejected, "; "))
	if tagErr != nil {
		return fmt.Errorf("%w: %s: %s; and at the tag: %s", ErrVerification, ref, msg, withoutFamily(tagErr))
	}
	return fmt.Errorf("%w: %s: %s", ErrVerification, ref, msg)
}

// withoutFamily is err's message without this package's family prefix,
// for quoting one refusal inside another.
func withoutFamily(err error) string {
	msg := err.Error()
	for _, e := range []error{ErrNoSignatures, ErrNoAttestations, ErrVerification} {
		if rest, ok := strings.CutPrefix(msg, e.Error()+": "); ok {
			return rest
		}
	}
	return msg
}
