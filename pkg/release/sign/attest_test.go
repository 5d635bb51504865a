package sign_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// provenance returns a SLSA v1 provenance statement about ref.
func provenance(t *testing.T, ref name.Digest, builder string) []byte {
	t.Helper()
	st, err := attest.Provenance(attest.TemplateBuild{
		Name:       ref.Context().Name(),
		TemplateID: ref.DigestStr(),
		SpecDigest: "sha256:" + strings.Repeat("b", 64),
		BaseRef:    "registry.example/base:1",
		BaseDigest: "sha256:" + strings.Repeat("c", 64),
		BuilderID:  builder,
		Started:    time.Unix(1700000000, 0),
		Finished:   time.Unix(1700000060, 0),
		Epoch:      1700000000,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := attest.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAttestVerify(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "tmpl")
	k := newKeys(t, "pw")
	stmt := provenance(t, ref, "https://slipway.dev/builders/test")

	res, err := sign.Attest(ctx, ref, k.sv, stmt, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	wantTag := "sha256-" + strings.TrimPrefix(ref.DigestStr(), "sha256:") + ".att"
	if res.Status != sign.Created || !res.Verified || res.AttestationTag.TagStr() != wantTag || res.PredicateType != attest.PredicateSLSAProvenanceV1 {
		t.Errorf("Attest = %+v, want created+verified at %s", res, wantTag)
	}
	var env struct{ PayloadType, Payload string }
	if err := json.Unmarshal(res.Envelope, &env); err != nil || env.PayloadType != "application/vnd.in-toto+json" {
		t.Errorf("envelope %s: %v, want a DSSE envelope of in-toto type", res.Envelope, err)
	}

	ver, err := sign.VerifyAttestations(ctx, ref, k.v, sign.WithOfflineNoTlog())
	if err != nil {
		t.Fatalf("VerifyAttestations: %v", err)
	}
	got := ver.Predicate(attest.PredicateSLSAProvenanceV1)
	if len(got) != 1 || !bytes.Equal(got[0].Payload, stmt) {
		t.Fatalf("verified = %+v, want the statement just attached", ver.Attestations)
	}
	if p, err := attest.ProvenanceOf(got[0].Statement); err != nil || p.GetRunDetails().GetBuilder().GetId() != "https://slipway.dev/builders/test" {
		t.Errorf("ProvenanceOf(verified) = %v, %v", p, err)
	}

	// Repeat-safe: the same statement by the same key is not attached twice.
	again, err := sign.Attest(ctx, ref, k.sv, stmt, sign.WithOfflineNoTlog())
	if err != nil || again.Status != sign.Unchanged {
		t.Fatalf("second Attest = %+v, %v; want unchanged", again, err)
	}
	// A different statement (an SBOM) is appended beside it.
	sbom, err := attest.SBOM(ref.Context().Name(), ref.DigestStr(), attest.PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`))
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := attest.Marshal(sbom)
	if r, err := sign.Attest(ctx, ref, k.sv, sb, sign.WithOfflineNoTlog()); err != nil || r.Status != sign.Created {
		t.Fatalf("Attest(SBOM) = %+v, %v", r, err)
	}
	ver, err = sign.VerifyAttestations(ctx, ref, k.v, sign.WithOfflineNoTlog())
	if err != nil || len(ver.Attestations) != 2 || len(ver.Predicate(attest.PredicateSPDX)) != 1 {
		t.Fatalf("after SBOM: %+v, %v; want 2 attestations, one SPDX", ver, err)
	}
}

func TestAttestRefusals(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "tmpl")
	other := pushRandom(t, host, "tmpl")
	k := newKeys(t, "pw")
	off := sign.WithOfflineNoTlog()

	// A statement about another digest is not attached.
	_, err := sign.Attest(ctx, ref, k.sv, provenance(t, other, "b"), off)
	if !errors.Is(err, sign.ErrInput) || !strings.Contains(err.Error(), ref.DigestStr()) {
		t.Errorf("Attest(statement about other) err = %v, want ErrInput naming %s", err, ref.DigestStr())
	}
	// encoding/json field names are refused.
	bad := []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` +
		strings.TrimPrefix(ref.DigestStr(), "sha256:") + `"}}],"predicate_type":"https://slsa.dev/provenance/v1","predicate":{}}`)
	if _, err := sign.Attest(ctx, ref, k.sv, bad, off); !errors.Is(err, sign.ErrInput) || !strings.Contains(err.Error(), "predicate_type") {
		t.Errorf("Attest(snake_case statement) err = %v, want ErrInput naming predicate_type", err)
	}
	if _, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "b")); !errors.Is(err, sign.ErrTlogChoice) {
		t.Errorf("Attest without a tlog choice err = %v", err)
	}
	// Nothing attached: a clear "no attestations".
	if _, err := sign.VerifyAttestations(ctx, ref, k.v, off); !errors.Is(err, sign.ErrNoAttestations) || !strings.Contains(err.Error(), ref.DigestStr()) {
		t.Errorf("VerifyAttestations(none) err = %v, want ErrNoAttestations naming the digest", err)
	}

	if _, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "b"), off); err != nil {
		t.Fatal(err)
	}
	wrong := newKeys(t, "other")
	if _, err := sign.VerifyAttestations(ctx, ref, wrong.v, off); !errors.Is(err, sign.ErrVerification) || errors.Is(err, sign.ErrNoAttestations) {
		t.Errorf("VerifyAttestations(wrong key) err = %v, want ErrVerification", err)
	}
}

// TestTamperedAttestationRefused rewrites the statement inside a stored
// envelope (keeping its signature) and copies an attestation to another
// digest; both must be refused with a reason.
func TestTamperedAttestationRefused(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "tmpl")
	other := pushRandom(t, host, "tmpl")
	k := newKeys(t, "pw")
	off := sign.WithOfflineNoTlog()
	res, err := sign.Attest(ctx, ref, k.sv, provenance(t, ref, "https://good"), off)
	if err != nil {
		t.Fatal(err)
	}

	// Tamper: same envelope signature, builder id changed in the payload.
	var env map[string]any
	if err := json.Unmarshal(res.Envelope, &env); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	env["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte("https://good"), []byte("https://evil"), 1))
	tampered, _ := json.Marshal(env)
	writeAttestationImage(t, res.AttestationTag, tampered)
	_, err = sign.VerifyAttestations(ctx, ref, k.v, off)
	if !errors.Is(err, sign.ErrVerification) || !strings.Contains(err.Error(), ref.DigestStr()) || !strings.Contains(err.Error(), "accepted signatures") {
		t.Fatalf("tampered: err = %v, want ErrVerification naming the digest and the signature check", err)
	}

	// Copy: a good envelope for ref, stored at other's .att tag.
	otherTag := other.Context().Tag("sha256-" + strings.TrimPrefix(other.DigestStr(), "sha256:") + ".att")
	writeAttestationImage(t, otherTag, res.Envelope)
	_, err = sign.VerifyAttestations(ctx, other, k.v, off)
	if !errors.Is(err, sign.ErrVerification) || !strings.Contains(err.Error(), "subject") {
		t.Fatalf("copied: err = %v, want ErrVerification about the subject", err)
	}
}

// writeAttestationImage stores env as the only attestation layer at tag.
func writeAttestationImage(t *testing.T, tag name.Tag, env []byte) {
	t.Helper()
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:       static.NewLayer(env, types.MediaType("application/vnd.dsse.envelope.v1+json")),
		Annotations: map[string]string{"predicateType": attest.PredicateSLSAProvenanceV1, "dev.cosignproject.cosign/signature": ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentSigners runs several signers with different keys on one
// digest at once, and as many attesters: the .sig and .att tags are
// read-append-write, so without serialisation one would lose the other's
// entry. Every key must verify afterwards.
func TestConcurrentSigners(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "app")
	const n = 4
	keys := make([]keyPair, n)
	for i := range keys {
		keys[i] = newKeys(t, "pw")
	}
	off := sign.WithOfflineNoTlog()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range keys {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := sign.Sign(ctx, ref, keys[i].sv, off)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := sign.Attest(ctx, ref, keys[i].sv, provenance(t, ref, "b"), off)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		for _, v := range []signature.Verifier{k.v} {
			if _, err := sign.Verify(ctx, ref, v, off); err != nil {
				t.Errorf("key %d: signature lost: %v", i, err)
			}
			if _, err := sign.VerifyAttestations(ctx, ref, v, off); err != nil {
				t.Errorf("key %d: attestation lost: %v", i, err)
			}
		}
	}
}

// TestSignAndAttest signs and attaches two statements in one call: one
// write of the .att tag, both verified; a repeat changes nothing.
func TestSignAndAttest(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "tmpl")
	k := newKeys(t, "pw")
	off := sign.WithOfflineNoTlog()
	sbom, err := attest.SBOM(ref.Context().Name(), ref.DigestStr(), attest.PredicateSPDX, []byte(`{"spdxVersion":"SPDX-2.3"}`))
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := attest.Marshal(sbom)
	stmts := [][]byte{provenance(t, ref, "b"), sb}
	sres, ares, err := sign.SignAndAttest(ctx, ref, k.sv, stmts, off)
	if err != nil {
		t.Fatal(err)
	}
	if sres.Status != sign.Created || len(ares) != 2 || ares[0].Status != sign.Created || ares[1].PredicateType != attest.PredicateSPDX {
		t.Fatalf("results %+v %+v", sres, ares)
	}
	ver, err := sign.VerifyAttestations(ctx, ref, k.v, off)
	if err != nil || len(ver.Attestations) != 2 {
		t.Fatalf("verify: %+v, %v", ver, err)
	}
	sres, ares, err = sign.SignAndAttest(ctx, ref, k.sv, stmts, off)
	if err != nil || sres.Status != sign.Unchanged || ares[0].Status != sign.Unchanged || ares[1].Status != sign.Unchanged {
		t.Fatalf("repeat: %+v %+v %v", sres, ares, err)
	}
	if _, _, err := sign.SignAndAttest(ctx, ref, k.sv, stmts); !errors.Is(err, sign.ErrTlogChoice) {
		t.Errorf("no tlog choice: %v", err)
	}
}
