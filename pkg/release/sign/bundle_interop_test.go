package sign_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// emptyTrustedRoot is a Sigstore trusted root with no CA, log or TSA in it.
// cosign refuses to verify bundles without a trusted root and would fetch
// the public one from TUF; with a key and no log, the key is all the trust
// there is (sign.WithOfflineNoTlog does the same in-process).
const emptyTrustedRoot = `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`

// TestInteropBundles: Sigstore bundles (v0.3, stored as referrers on
// docker-registry 2.8, so through the referrers tag schema) written by
// sign.Sign/Attest(WithBundle) pass "cosign verify/verify-attestation
// --new-bundle-format --key", and those written by "cosign sign/attest
// --new-bundle-format --key --tlog-upload=false" pass sign.Verify and
// sign.Verify and sign.VerifyAttestations. In the first direction the
// classic tags are deleted, so only the bundles can be what verifies.
func TestInteropBundles(t *testing.T) {
	cos := newCosign(t)
	ctx := context.Background()
	reg := registrytest.NewDistribution(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "trusted_root.json")
	writeFile(t, root, []byte(emptyTrustedRoot))
	bundleVerify := args([]string{"--new-bundle-format", "--trusted-root", root}, offlineVerifyFlags, registryFlags)
	off := sign.WithOfflineNoTlog()

	t.Run("slipway writes, cosign verifies", func(t *testing.T) {
		ref := pushImage(t, reg.Addr(), "interop/bundled-by-slipway")
		_, pubPath, k := slipwayKeyFiles(t)
		_, otherPub, _ := slipwayKeyFiles(t)
		stmt, _ := slsaStatement(t, ref)
		if _, err := sign.Sign(ctx, ref, k.sv, off, sign.WithBundle()); err != nil {
			t.Fatal(err)
		}
		if _, err := sign.Attest(ctx, ref, k.sv, stmt, off, sign.WithBundle()); err != nil {
			t.Fatal(err)
		}
		deleteTag(t, cosignTag(ref, "sig"))
		deleteTag(t, cosignTag(ref, "att"))

		cos.must(t, dir, args([]string{"verify", "--key", pubPath}, bundleVerify, []string{ref.String()})...)
		out := cos.must(t, dir, args([]string{"verify-attestation", "--key", pubPath, "--type", "slsaprovenance1"}, bundleVerify, []string{ref.String()})...)
		if !bytes.Contains(out, []byte("payload")) {
			t.Errorf("cosign verify-attestation --new-bundle-format printed no envelope:\n%s", out)
		}
		stderr := cos.refuses(t, dir, args([]string{"verify", "--key", otherPub}, bundleVerify, []string{ref.String()})...)
		t.Logf("cosign verify --new-bundle-format with another key: %s", lastLine(stderr))
	})

	t.Run("cosign writes, slipway verifies", func(t *testing.T) {
		ref := pushImage(t, reg.Addr(), "interop/bundled-by-cosign")
		privPath, pubPath := cos.keyPair(t)
		_, pred := slsaStatement(t, ref)
		predPath := filepath.Join(t.TempDir(), "pred.json")
		writeFile(t, predPath, pred)
		cos.must(t, dir, args([]string{"sign", "--key", privPath, "--new-bundle-format", "--tlog-upload=false", "--yes"}, registryFlags, []string{ref.String()})...)
		cos.must(t, dir, args([]string{"attest", "--key", privPath, "--new-bundle-format", "--type", "slsaprovenance1", "--predicate", predPath, "--tlog-upload=false", "--yes"}, registryFlags, []string{ref.String()})...)

		v, err := sign.LoadVerifier(readFile(t, pubPath))
		if err != nil {
			t.Fatal(err)
		}
		ver, err := sign.Verify(ctx, ref, v, off)
		if err != nil {
			t.Fatalf("sign.Verify of cosign's bundle: %v", err)
		}
		if len(ver.Signatures) != 1 || ver.Signatures[0].Source != sign.SourceBundle {
			t.Errorf("sign.Verify = %+v, want cosign's signature bundle", ver.Signatures)
		}
		// cosign attest writes an in-toto Statement v0.1 ("_type"
		// https://in-toto.io/Statement/v0.1) in the tag and in the bundle
		// alike. Whatever attest.Parse makes of that, the bundle must be
		// judged as the tag is: attach the same predicate the classic way
		// too and compare the verdicts.
		cos.must(t, dir, args([]string{"attest", "--key", privPath, "--type", "slsaprovenance1", "--predicate", predPath, "--tlog-upload=false", "--yes"}, registryFlags, []string{ref.String()})...)
		atts, err := sign.VerifyAttestations(ctx, ref, v, off)
		if err == nil {
			got := atts.Predicate(attest.PredicateSLSAProvenanceV1)
			if src := sources(got, attSource); len(got) != 2 || src[sign.SourceTag] != 1 || src[sign.SourceBundle] != 1 {
				t.Fatalf("sign.VerifyAttestations = %+v, rejected %q; want cosign's provenance from the tag and from the bundle", atts.Attestations, atts.Rejected)
			}
			for _, a := range got {
				if p, err := attest.ProvenanceOf(a.Statement); err != nil || p.GetRunDetails().GetBuilder().GetId() != "https://slipway.dev/builders/interop@v1" {
					t.Errorf("attest.ProvenanceOf(cosign's %s statement) = %v, %v", a.Source, p, err)
				}
			}
		} else {
			tagWhy := regexp.MustCompile(`\.att: ([^;]+)`).FindStringSubmatch(err.Error())
			bundleWhy := regexp.MustCompile(`bundle sha256:[0-9a-f]{64}: ([^;]+)`).FindStringSubmatch(err.Error())
			if !errors.Is(err, sign.ErrVerification) || tagWhy == nil || bundleWhy == nil || tagWhy[1] != bundleWhy[1] {
				t.Fatalf("sign.VerifyAttestations err = %v; want the tag entry and the bundle refused for the same reason", err)
			}
			t.Logf("cosign's attestation refused from the tag and from the bundle alike: %s", bundleWhy[1])
		}
		other := fastKeys(t)
		if _, err := sign.Verify(ctx, ref, other.v, off); !errors.Is(err, sign.ErrVerification) {
			t.Errorf("sign.Verify with another key: err = %v, want ErrVerification", err)
		}
	})
}
