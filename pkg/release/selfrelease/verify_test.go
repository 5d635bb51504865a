package selfrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/release/template"
	"github.com/slipway-dev/slipway/testharness/need"
)

// checkVerify: the pushed release's images pass the policy the release
// wrote, by digest and through the version tag; an image of the same binary
// signed by the same key whose provenance names another builder is refused.
func checkVerify(t *testing.T, ctx context.Context, r *Result, sv signature.SignerVerifier) {
	t.Helper()
	p, err := policy.Load(filepath.Join(r.Out, r.Policy))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range r.Images {
		if im.Ref == "" || im.Tag == "" {
			t.Fatalf("%s not pushed: %+v", im.Program, im)
		}
		tag, _ := name.NewTag(im.Tag)
		desc, err := remote.Head(tag)
		if err != nil || desc.Digest.String() != im.Digest {
			t.Fatalf("tag %s: %v %v, want %s", im.Tag, desc, err, im.Digest)
		}
		res, err := p.Verify(ctx, policy.Target{Ref: im.Ref})
		if err != nil || !res.Verified {
			t.Fatalf("verify %s: %v %+v", im.Ref, err, res)
		}
	}
	// Built elsewhere: the runner binary in an image not made by the
	// release, pushed to the release's repository, signed by the release
	// key, with an SBOM and a provenance naming another builder.
	runner := r.Images[len(r.Images)-1]
	var bin Binary
	for _, b := range r.Binaries {
		if b.Program == runner.Program {
			bin = b
		}
	}
	stage := t.TempDir()
	if err := linkOrCopy(filepath.Join(r.Out, bin.File), filepath.Join(stage, runner.Program)); err != nil {
		t.Fatal(err)
	}
	pl, _ := v1.ParsePlatform(bin.Platform)
	img, done, err := template.ImageFromDir(ctx, stage, time.Unix(r.Epoch, 0).UTC(), *pl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	repo := strings.SplitN(runner.Ref, "@", 2)[0]
	ref, err := template.Push(ctx, img, repo)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	st, err := attest.GoReleaseProvenance(attest.GoRelease{
		Subjects: []attest.Subject{{Name: repo, Digest: d.String()}}, Source: Source, Commit: r.Commit, Version: r.Version,
		GoVersion: r.GoVersion, BuilderID: "https://github.com/actions/runner/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	prov, _ := attest.Marshal(st)
	spdx, _ := os.ReadFile(filepath.Join(r.Out, bin.SBOM))
	sst, err := attest.SBOM(repo, d.String(), attest.PredicateSPDX, spdx)
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := attest.Marshal(sst)
	dref, _ := name.NewDigest(ref)
	if _, _, err := sign.SignAndAttest(ctx, dref, sv, [][]byte{prov, sb}, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}
	res, err := p.Verify(ctx, policy.Target{Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, c := range res.Checks {
		if !c.Passed {
			why += c.Name + ": " + c.Reason + "\n"
		}
	}
	if res.Verified || !strings.Contains(why, "elsewhere") || !strings.Contains(why, BuilderID) {
		t.Fatalf("an image built elsewhere: verified %v, failed checks:\n%s", res.Verified, why)
	}
}

// TestVerifyDownload: a download is accepted only with the release key's
// signature over checksums.txt and the sha256 checksums.txt lists for it;
// the cosign CLI ($COSIGN) accepts the signature too.
func TestVerifyDownload(t *testing.T) {
	sv, pub := testSigner(t)
	other, _ := testSigner(t)
	bin := []byte("\x7fELF a binary")
	sum := sha256.Sum256(bin)
	sums := []byte(hex.EncodeToString(sum[:]) + "  slipway-linux-amd64\n" + strings.Repeat("0", 64) + "  slipway-linux-arm64\n")
	sig, err := sign.SignBlob(sv, sums)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyDownload(v, sums, sig, "slipway-linux-amd64", bin); err != nil {
		t.Fatalf("good download refused: %v", err)
	}
	otherSig, _ := sign.SignBlob(other, sums)
	for name, err := range map[string]error{
		"tampered binary":   VerifyDownload(v, sums, sig, "slipway-linux-amd64", append([]byte("!"), bin...)),
		"tampered sums":     VerifyDownload(v, append([]byte("#"), sums...), sig, "slipway-linux-amd64", bin),
		"another key":       VerifyDownload(v, sums, otherSig, "slipway-linux-amd64", bin),
		"not listed":        VerifyDownload(v, sums, sig, "slipway-linux-riscv64", bin),
		"listed, other sum": VerifyDownload(v, sums, sig, "slipway-linux-arm64", bin),
	} {
		if !errors.Is(err, sign.ErrVerification) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCosignVerifiesDownload: the cosign CLI ($COSIGN) accepts the
// signature over checksums.txt that the release writes, with cosign's own
// verify-blob, as docs/install.md tells a user to run it; and refuses it over
// a tampered checksums.txt.
func TestCosignVerifiesDownload(t *testing.T) {
	need.Short(t, "the cosign CLI")
	cosign := need.Env(t, "COSIGN", "the cosign CLI (make test builds bin/cosign and sets COSIGN)")
	if _, err := os.Stat(cosign); err != nil {
		t.Fatalf("COSIGN=%s: %v", cosign, err)
	}
	sv, pub := testSigner(t)
	sums := []byte(strings.Repeat("1", 64) + "  slipway-linux-amd64\n")
	sig, err := sign.SignBlob(sv, sums)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for f, b := range map[string][]byte{"checksums.txt": sums, "checksums.txt.sig": sig, "release.pub": pub} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(cosign, "verify-blob", "--key", "release.pub", "--signature", "checksums.txt.sig", "--insecure-ignore-tlog", "checksums.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign verify-blob: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "checksums.txt"), append([]byte("#"), sums...), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(cosign, "verify-blob", "--key", "release.pub", "--signature", "checksums.txt.sig", "--insecure-ignore-tlog", "checksums.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("cosign verify-blob accepted a tampered checksums.txt:\n%s", out)
	}
}
