package sign_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// newReferrersRegistry starts go-containerregistry's in-process registry
// with its OCI 1.1 referrers API switched on (registrytest.NewInProcess
// leaves it off, so that one uses the tag schema like docker-registry).
func newReferrersRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// bundleRegistries are the registries the bundle tests run on, and whether
// each has the referrers API (else the referrers tag schema is used):
// under -short only the in-process one (Debian's docker-registry is left out).
func bundleRegistries(t *testing.T) []struct {
	name   string
	host   string
	hasAPI bool
} {
	t.Helper()
	regs := []struct {
		name   string
		host   string
		hasAPI bool
	}{
		{"in-process with referrers API", newReferrersRegistry(t), true},
	}
	if testing.Short() {
		return regs
	}
	return append(regs, struct {
		name   string
		host   string
		hasAPI bool
	}{"docker-registry 2.8 (tag schema)", registrytest.NewDistribution(t).Addr(), false})
}

// fastKeys is newKeys without cosign's password encryption (scrypt is
// seconds under -race); priv is an unencrypted PKCS #8 PEM. The signer and
// verifier are the same ECDSA P-256 kinds that LoadSigner and LoadVerifier
// return.
func fastKeys(t *testing.T) keyPair {
	t.Helper()
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(pk, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := cryptoutils.MarshalPrivateKeyToPEM(pk)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(pk.Public())
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{priv: priv, pub: pub, sv: sv, v: v}
}

// loadFastSigner reads a fastKeys private key.
func loadFastSigner(priv []byte) (signature.SignerVerifier, error) {
	pk, err := cryptoutils.UnmarshalPEMToPrivateKey(priv, cryptoutils.SkipPassword)
	if err != nil {
		return nil, err
	}
	return signature.LoadSignerVerifier(pk, crypto.SHA256)
}

// fallbackTag is the referrers tag schema's index tag for d.
func fallbackTag(d name.Digest) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1))
}

func cosignTag(d name.Digest, suffix string) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + "." + suffix)
}

// deleteTag removes the image at tag. go-containerregistry's registry
// deletes a tag by name; docker-registry 2.8 deletes by digest only (and
// the manifest's tags with it).
func deleteTag(t *testing.T, tag name.Tag) {
	t.Helper()
	desc, err := remote.Head(tag)
	if err != nil {
		t.Fatalf("head %s: %v", tag, err)
	}
	if err := remote.Delete(tag); err != nil {
		if err := remote.Delete(tag.Context().Digest(desc.Digest.String())); err != nil {
			t.Fatalf("delete %s: %v", tag, err)
		}
	}
	if _, err := remote.Head(tag); err == nil {
		t.Fatalf("%s is still there after delete", tag)
	}
}

// bundleReferrers counts the Sigstore bundles listed as referrers of d.
func bundleReferrers(t *testing.T, d name.Digest) int {
	t.Helper()
	idx, err := ociremote.Referrers(d, "")
	if err != nil {
		t.Fatalf("referrers of %s: %v", d, err)
	}
	n := 0
	for _, m := range idx.Manifests {
		if _, ok := m.Annotations["dev.sigstore.bundle.content"]; ok {
			n++
		}
	}
	return n
}

func sources[T any](xs []T, src func(T) sign.Source) map[sign.Source]int {
	out := map[sign.Source]int{}
	for _, x := range xs {
		out[src(x)]++
	}
	return out
}

func sigSource(s sign.VerifiedSignature) sign.Source   { return s.Source }
func attSource(a sign.VerifiedAttestation) sign.Source { return a.Source }

// TestBundleSignAttestVerify signs and attests with WithBundle on a
// registry with the referrers API and on one without, checks repeat calls
// write nothing, that cosign's own bundle verifier accepts what was
// written, and that with the classic tags deleted the bundles alone verify,
// and only for the right key.
func TestBundleSignAttestVerify(t *testing.T) {
	for _, reg := range bundleRegistries(t) {
		t.Run(reg.name, func(t *testing.T) {
			ctx := context.Background()
			ref := pushRandom(t, reg.host, "tmpl")
			k := newKeys(t, "pw")
			off := sign.WithOfflineNoTlog()
			stmt := provenance(t, ref, "https://slipway.dev/builders/bundle")

			sres, err := sign.Sign(ctx, ref, k.sv, off, sign.WithBundle())
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if sres.Status != sign.Created || !sres.Verified || sres.Bundle == nil || sres.Bundle.Status != sign.Created {
				t.Fatalf("Sign = %+v (bundle %+v), want created and verified, bundle created", sres, sres.Bundle)
			}
			ares, err := sign.Attest(ctx, ref, k.sv, stmt, off, sign.WithBundle())
			if err != nil {
				t.Fatalf("Attest: %v", err)
			}
			if ares.Status != sign.Created || ares.Bundle == nil || ares.Bundle.Status != sign.Created || ares.Bundle.Referrer == sres.Bundle.Referrer {
				t.Fatalf("Attest = %+v (bundle %+v), want created, a bundle of its own", ares, ares.Bundle)
			}
			var b struct {
				MediaType            string
				VerificationMaterial struct {
					PublicKey   struct{ Hint string }
					TlogEntries []any
				}
			}
			if err := json.Unmarshal(ares.Bundle.Bundle, &b); err != nil || b.MediaType != "application/vnd.dev.sigstore.bundle.v0.3+json" ||
				b.VerificationMaterial.PublicKey.Hint == "" || len(b.VerificationMaterial.TlogEntries) != 0 {
				t.Errorf("bundle %s (%v): want v0.3, a key hint, no tlog entry", ares.Bundle.Bundle, err)
			}

			// The API lists referrers where the registry has it; the tag
			// schema's index exists only where it does not.
			_, err = remote.Head(fallbackTag(ref))
			if reg.hasAPI != (err != nil) {
				t.Errorf("referrers index tag %s: head err = %v; registry has the referrers API: %v", fallbackTag(ref), err, reg.hasAPI)
			}
			if n := bundleReferrers(t, ref); n != 2 {
				t.Fatalf("%d bundle referrers, want 2", n)
			}

			// Repeat-safe: nothing new is written.
			sres2, err := sign.Sign(ctx, ref, k.sv, off, sign.WithBundle())
			if err != nil || sres2.Status != sign.Unchanged || sres2.Bundle.Status != sign.Unchanged || sres2.Bundle.Referrer != sres.Bundle.Referrer {
				t.Errorf("second Sign = %+v, %v; want unchanged, same referrer %s", sres2, err, sres.Bundle.Referrer)
			}
			ares2, err := sign.Attest(ctx, ref, k.sv, stmt, off, sign.WithBundle())
			if err != nil || ares2.Status != sign.Unchanged || ares2.Bundle.Status != sign.Unchanged || ares2.Bundle.Referrer != ares.Bundle.Referrer {
				t.Errorf("second Attest = %+v, %v; want unchanged, same referrer %s", ares2, err, ares.Bundle.Referrer)
			}
			if n := bundleReferrers(t, ref); n != 2 {
				t.Errorf("after repeats: %d bundle referrers, want 2", n)
			}

			// cosign's own bundle verification (what "cosign verify
			// --new-bundle-format --key" runs) accepts both bundles.
			co := &cosign.CheckOpts{SigVerifier: k.v, IgnoreTlog: true, IgnoreSCT: true, NewBundleFormat: true, TrustedMaterial: &root.BaseTrustedMaterial{}}
			if got, _, err := cosign.VerifyImageAttestations(ctx, ref, co); err != nil || len(got) != 2 {
				t.Errorf("cosign.VerifyImageAttestations (new bundle format) = %d, %v; want 2 verified", len(got), err)
			}

			// WithBundle requires a bundle and returns the tag entries too.
			ver, err := sign.Verify(ctx, ref, k.v, off, sign.WithBundle())
			if err != nil {
				t.Fatalf("Verify(WithBundle): %v", err)
			}
			if got := sources(ver.Signatures, sigSource); got[sign.SourceTag] != 1 || got[sign.SourceBundle] != 1 {
				t.Errorf("Verify(WithBundle) sources = %v, want one tag, one bundle", got)
			}
			atts, err := sign.VerifyAttestations(ctx, ref, k.v, off)
			if err != nil {
				t.Fatalf("VerifyAttestations: %v", err)
			}
			if got := sources(atts.Attestations, attSource); got[sign.SourceTag] != 1 || got[sign.SourceBundle] != 1 || len(atts.Rejected) != 0 {
				t.Errorf("VerifyAttestations sources = %v, rejected %q; want one tag, one bundle, none rejected", got, atts.Rejected)
			}
			// Without WithBundle, a valid tag signature is enough: the
			// referrers are not read.
			if ver, err := sign.Verify(ctx, ref, k.v, off); err != nil || len(ver.Signatures) != 1 || ver.Signatures[0].Source != sign.SourceTag {
				t.Errorf("Verify = %+v, %v; want the tag signature only", ver, err)
			}

			// Bundles alone: delete the classic tags.
			deleteTag(t, cosignTag(ref, "sig"))
			deleteTag(t, cosignTag(ref, "att"))
			ver, err = sign.Verify(ctx, ref, k.v, off)
			if err != nil {
				t.Fatalf("Verify from the bundle: %v", err)
			}
			if len(ver.Signatures) != 1 || ver.Signatures[0].Source != sign.SourceBundle || ver.Signatures[0].Digest != sres.Bundle.Referrer {
				t.Fatalf("Verify = %+v, want the bundle signature at %s", ver.Signatures, sres.Bundle.Referrer)
			}
			if p := ver.Signatures[0].Payload; !bytes.Contains(p, []byte(ctypes.CosignSignPredicateType)) || !bytes.Contains(p, []byte(strings.TrimPrefix(ref.DigestStr(), "sha256:"))) {
				t.Errorf("bundle signature payload %s: want cosign's sign statement naming the digest", p)
			}
			atts, err = sign.VerifyAttestations(ctx, ref, k.v, off)
			if err != nil {
				t.Fatalf("VerifyAttestations from the bundle: %v", err)
			}
			got := atts.Predicate(attest.PredicateSLSAProvenanceV1)
			if len(atts.Attestations) != 1 || len(got) != 1 || got[0].Source != sign.SourceBundle || !bytes.Equal(got[0].Payload, stmt) || got[0].Digest != ares.Bundle.Referrer {
				t.Fatalf("VerifyAttestations = %+v, want the provenance statement from the bundle", atts.Attestations)
			}
			if p, err := attest.ProvenanceOf(got[0].Statement); err != nil || p.GetRunDetails().GetBuilder().GetId() != "https://slipway.dev/builders/bundle" {
				t.Errorf("ProvenanceOf(bundle statement) = %v, %v", p, err)
			}
			var env struct{ PayloadType, Payload string }
			if err := json.Unmarshal(got[0].Envelope, &env); err != nil || env.PayloadType != ctypes.IntotoPayloadType || env.Payload == "" {
				t.Errorf("bundle envelope %s: %v, want a DSSE envelope of in-toto type", got[0].Envelope, err)
			}

			// Another key: refused, and not as "none at all".
			wrong := fastKeys(t)
			_, err = sign.Verify(ctx, ref, wrong.v, off)
			if !errors.Is(err, sign.ErrVerification) || errors.Is(err, sign.ErrNoSignatures) || !strings.Contains(err.Error(), ref.DigestStr()) {
				t.Errorf("Verify(wrong key) err = %v, want ErrVerification naming the digest", err)
			}
			_, err = sign.VerifyAttestations(ctx, ref, wrong.v, off)
			if !errors.Is(err, sign.ErrVerification) || errors.Is(err, sign.ErrNoAttestations) || !strings.Contains(err.Error(), "bundle") {
				t.Errorf("VerifyAttestations(wrong key) err = %v, want ErrVerification about the bundle", err)
			}

			// Nothing at all, and WithBundle on tag-only signatures.
			bare := pushRandom(t, reg.host, "bare")
			if _, err := sign.Verify(ctx, bare, k.v, off); !errors.Is(err, sign.ErrNoSignatures) || !strings.Contains(err.Error(), "referrers") {
				t.Errorf("Verify(unsigned) err = %v, want ErrNoSignatures mentioning the referrers", err)
			}
			if _, err := sign.VerifyAttestations(ctx, bare, k.v, off); !errors.Is(err, sign.ErrNoAttestations) {
				t.Errorf("VerifyAttestations(unattested) err = %v, want ErrNoAttestations", err)
			}
			if _, err := sign.Sign(ctx, bare, k.sv, off); err != nil {
				t.Fatal(err)
			}
			if _, err := sign.Verify(ctx, bare, k.v, off, sign.WithBundle()); !errors.Is(err, sign.ErrVerification) || !strings.Contains(err.Error(), "WithBundle requires") {
				t.Errorf("Verify(WithBundle, tag only) err = %v, want ErrVerification saying a bundle is required", err)
			}
		})
	}
}

func TestBundleOptionRefusals(t *testing.T) {
	ctx := context.Background()
	host := newReferrersRegistry(t)
	ref := pushRandom(t, host, "app")
	k := fastKeys(t)
	opts := []sign.Option{sign.WithOfflineNoTlog(), sign.WithBundle(), sign.WithAnnotations(map[string]string{"env": "prod"})}
	if _, err := sign.Sign(ctx, ref, k.sv, opts...); !errors.Is(err, sign.ErrInput) || !strings.Contains(err.Error(), "WithAnnotations") {
		t.Errorf("Sign(WithBundle, WithAnnotations) err = %v, want ErrInput", err)
	}
	if _, err := sign.Verify(ctx, ref, k.v, opts...); !errors.Is(err, sign.ErrInput) {
		t.Errorf("Verify(WithBundle, WithAnnotations) err = %v, want ErrInput", err)
	}
	if _, err := sign.Sign(ctx, ref, k.sv, sign.WithBundle()); !errors.Is(err, sign.ErrTlogChoice) {
		t.Errorf("Sign(WithBundle) without a tlog choice err = %v, want ErrTlogChoice", err)
	}
}

// TestBundleCopiedToAnotherDigestRefused copies the bundles made for A as
// referrers of B. Their signatures are good; their statements name A. B
// must not verify, and the trap must be real: without the artifact-digest
// policy sigstore-go accepts the copy.
func TestBundleCopiedToAnotherDigestRefused(t *testing.T) {
	for _, reg := range bundleRegistries(t) {
		t.Run(reg.name, func(t *testing.T) {
			ctx := context.Background()
			a := pushRandom(t, reg.host, "app")
			b := pushRandom(t, reg.host, "app")
			k := fastKeys(t)
			off := sign.WithOfflineNoTlog()
			sres, err := sign.Sign(ctx, a, k.sv, off, sign.WithBundle())
			if err != nil {
				t.Fatal(err)
			}
			ares, err := sign.Attest(ctx, a, k.sv, provenance(t, a, "https://b"), off, sign.WithBundle())
			if err != nil {
				t.Fatal(err)
			}
			if err := ociremote.WriteAttestationNewBundleFormat(b, sres.Bundle.Bundle, ctypes.CosignSignPredicateType); err != nil {
				t.Fatal(err)
			}
			if err := ociremote.WriteAttestationNewBundleFormat(b, ares.Bundle.Bundle, attest.PredicateSLSAProvenanceV1); err != nil {
				t.Fatal(err)
			}

			// The trap is real.
			bundles, _, err := cosign.GetBundles(ctx, b, &cosign.CheckOpts{})
			if err != nil || len(bundles) != 2 {
				t.Fatalf("precondition: %d bundles at B, %v", len(bundles), err)
			}
			co := &cosign.CheckOpts{SigVerifier: k.v, IgnoreTlog: true, NewBundleFormat: true, TrustedMaterial: &root.BaseTrustedMaterial{}}
			if _, err := cosign.VerifyNewBundle(ctx, co, sgverify.WithoutArtifactUnsafe(), bundles[0]); err != nil {
				t.Fatalf("precondition: the copied bundle does not verify even without a digest policy (%v); the test proves nothing", err)
			}

			_, err = sign.Verify(ctx, b, k.v, off)
			if !errors.Is(err, sign.ErrVerification) || errors.Is(err, sign.ErrNoSignatures) || !strings.Contains(err.Error(), b.DigestStr()) || !strings.Contains(err.Error(), "digest") {
				t.Errorf("Verify(B) with A's bundle: err = %v, want ErrVerification about the digest", err)
			}
			_, err = sign.VerifyAttestations(ctx, b, k.v, off)
			if !errors.Is(err, sign.ErrVerification) || errors.Is(err, sign.ErrNoAttestations) || !strings.Contains(err.Error(), "digest") {
				t.Errorf("VerifyAttestations(B) with A's bundle: err = %v, want ErrVerification about the digest", err)
			}
			t.Logf("copied bundle refused: %v", err)
			// A still verifies from its bundle.
			if _, err := sign.Verify(ctx, a, k.v, off, sign.WithBundle()); err != nil {
				t.Errorf("Verify(A): %v", err)
			}
		})
	}
}

// rawBundle signs statement with sv and wraps it in a key-only bundle with
// cosign's parts directly (no checks of the statement).
func rawBundle(t *testing.T, sv signature.SignerVerifier, statement []byte) []byte {
	t.Helper()
	env, err := dsse.WrapSigner(sv, ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(statement))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cbundle.MakeNewBundle(pub, nil, statement, env, pem, nil)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestBundleStatementMustParse stores a correctly signed bundle whose
// statement names the digest but was serialised with encoding/json field
// names: sigstore-go accepts it, attest.Parse does not, and neither may
// VerifyAttestations.
func TestBundleStatementMustParse(t *testing.T) {
	ctx := context.Background()
	host := newReferrersRegistry(t)
	ref := pushRandom(t, host, "tmpl")
	k := fastKeys(t)
	bad := []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` +
		strings.TrimPrefix(ref.DigestStr(), "sha256:") + `"}}],"predicate_type":"https://slsa.dev/provenance/v1","predicate":{}}`)
	if err := ociremote.WriteAttestationNewBundleFormat(ref, rawBundle(t, k.sv, bad), attest.PredicateSLSAProvenanceV1); err != nil {
		t.Fatal(err)
	}

	_, err := sign.VerifyAttestations(ctx, ref, k.v, sign.WithOfflineNoTlog())
	if !errors.Is(err, sign.ErrVerification) || !strings.Contains(err.Error(), "predicate_type") {
		t.Fatalf("VerifyAttestations(snake_case bundle) err = %v, want ErrVerification naming predicate_type", err)
	}
	// Beside a good one it is listed as rejected, with its reason.
	if _, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "b"), sign.WithOfflineNoTlog(), sign.WithBundle()); err != nil {
		t.Fatal(err)
	}
	ver, err := sign.VerifyAttestations(ctx, ref, k.v, sign.WithOfflineNoTlog(), sign.WithBundle())
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(ver.Attestations, attSource); got[sign.SourceBundle] != 1 || len(ver.Rejected) != 1 || !strings.Contains(ver.Rejected[0], "predicate_type") {
		t.Errorf("sources %v, rejected %q; want one good bundle and the snake_case one rejected", got, ver.Rejected)
	}
}

// TestBundleOfflineTalksOnlyToTheRegistry signs, attests and verifies with
// bundles (tags deleted, so Verify must read the referrers) through a
// transport that refuses any host but the registry.
func TestBundleOfflineTalksOnlyToTheRegistry(t *testing.T) {
	for _, api := range []bool{true, false} {
		t.Run(fmt.Sprintf("referrers API %v", api), func(t *testing.T) {
			ctx := context.Background()
			host := registrytest.NewInProcess(t)
			if api {
				host = newReferrersRegistry(t)
			}
			ref := pushRandom(t, host, "app")
			k := fastKeys(t)
			tr := &onlyHost{host: host}
			opts := []sign.Option{sign.WithOfflineNoTlog(), sign.WithTransport(tr), sign.WithBundle()}
			if _, err := sign.Sign(ctx, ref, k.sv, opts...); err != nil {
				t.Fatal(err)
			}
			if _, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "b"), opts...); err != nil {
				t.Fatal(err)
			}
			deleteTag(t, cosignTag(ref, "sig"))
			deleteTag(t, cosignTag(ref, "att"))
			tr.n.Store(0)
			ver, err := sign.Verify(ctx, ref, k.v, opts[:2]...)
			if err != nil || ver.Signatures[0].Source != sign.SourceBundle {
				t.Fatalf("Verify = %+v, %v; want the bundle", ver, err)
			}
			if _, err := sign.VerifyAttestations(ctx, ref, k.v, opts...); err != nil {
				t.Fatal(err)
			}
			if tr.n.Load() == 0 {
				t.Error("the transport saw no requests; WithTransport is not used for bundles")
			}
		})
	}
}
