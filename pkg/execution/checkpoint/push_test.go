package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// A checkpoint pushed to a registry (go-containerregistry's registry,
// in-process) by digest, signed and attested with the runtime's key as
// cosign does, pulled into another host's empty store verifying first, and
// restored there with every file as it was. Incremental checkpoints share
// their layers in the registry too. Pull refuses, with the store left
// empty, a checkpoint signed with another key, one of another tenant or
// generation, and a digest the registry does not hold; Push refuses a
// checkpoint whose stored attestation is not the signer's.
func TestPushPullRestore(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "src/a.go"), []byte("package a\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "data.bin"), bytes.Repeat([]byte{9, 8, 7}, 50000), 0o600))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	cp1, base, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(ws, "src/b.go"), []byte("package a // b\n"), 0o644))
	cp2, _, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv), WithBase(base))
	must(t, err)
	want := hashTree(t, ws)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/checkpoints/run-1")
	must(t, err)
	p1, err := Push(ctx, st, cp1.Digest, repo, sv)
	must(t, err)
	p2, err := Push(ctx, st, cp2.Digest, repo, sv)
	must(t, err)
	if p2.Ref != repo.Digest(cp2.Digest).String() || !strings.HasSuffix(p2.SignatureTag, ".sig") || !strings.HasSuffix(p2.AttestationTag, ".att") {
		t.Fatalf("pushed: %+v", p2)
	}
	// What the registry holds is what cosign verifies, by digest.
	ref2 := repo.Digest(cp2.Digest)
	if _, err := sign.Verify(ctx, ref2, v, sign.WithOfflineNoTlog()); err != nil {
		t.Fatalf("the pushed checkpoint's signature: %v", err)
	}
	av, err := sign.VerifyAttestations(ctx, ref2, v, sign.WithOfflineNoTlog())
	if err != nil || len(av.Predicate(PredicateType)) != 1 {
		t.Fatalf("the pushed checkpoint's attestation: %+v, %v", av, err)
	}
	img, err := remote.Image(ref2)
	must(t, err)
	m2, err := img.Manifest()
	must(t, err)
	img1, err := remote.Image(repo.Digest(p1.Ref[strings.Index(p1.Ref, "@")+1:]))
	must(t, err)
	m1, err := img1.Manifest()
	must(t, err)
	if m2.ArtifactType != ArtifactType || len(m2.Layers) != 2 || m2.Layers[0].Digest != m1.Layers[0].Digest {
		t.Fatalf("the registry's manifests: %+v / %+v", m1, m2)
	}

	exp := Expect{Tenant: "acme", Generations: []string{"gen-a"}, RunID: "run-1"}
	// Refusals leave the pulling store empty.
	other, otherV := keys(t)
	for _, c := range []struct {
		name string
		ref  name.Digest
		v    signature.Verifier
		exp  Expect
		why  string
	}{
		{"another key", ref2, otherV, exp, "signature does not verify"},
		{"another tenant", ref2, v, Expect{Tenant: "globex", Generations: []string{"gen-a"}}, `not of tenant "globex"`},
		{"another generation", ref2, v, Expect{Tenant: "acme", Generations: []string{"gen-b"}}, "does not take"},
		{"not in the registry", repo.Digest("sha256:" + strings.Repeat("0", 64)), v, exp, "signature does not verify"},
	} {
		dst, err := OpenStore(filepath.Join(t.TempDir(), "store"))
		must(t, err)
		_, err2 := Pull(ctx, dst, c.ref, c.v, c.exp)
		if !errors.Is(err2, ErrRefused) || !strings.Contains(err2.Error(), c.why) {
			t.Errorf("pull (%s): %v, want refused: %s", c.name, err2, c.why)
		}
		if l, _ := dst.List(); len(l) != 0 {
			t.Errorf("pull (%s) refused, yet the store lists %d checkpoints", c.name, len(l))
		}
		if blobs, _ := os.ReadDir(filepath.Join(dst.Dir(), "blobs", "sha256")); len(blobs) != 0 {
			t.Errorf("pull (%s) refused, yet it wrote %d blobs", c.name, len(blobs))
		}
	}
	if _, err := Push(ctx, st, cp2.Digest, repo, other); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no stored attestation holds with the signer's key") {
		t.Errorf("push with another key: %v, want refused", err)
	}

	// Another host: an empty store pulls it, verified, and restores it.
	dst, err := OpenStore(filepath.Join(t.TempDir(), "store"))
	must(t, err)
	got, err := Pull(ctx, dst, ref2, v, exp)
	must(t, err)
	if got.Digest != cp2.Digest || got.Predicate.EventSeq != 7 || got.Predicate.Parent != cp1.Digest {
		t.Fatalf("pulled: %+v", got)
	}
	to := filepath.Join(t.TempDir(), "restored")
	if _, _, _, err := Restore(ctx, dst, cp2.Digest, v, exp, to); err != nil {
		t.Fatal(err)
	}
	equalTrees(t, want, hashTree(t, to))
}
