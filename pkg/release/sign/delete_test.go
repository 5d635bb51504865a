package sign_test

import (
	"context"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// TestDelete: an image goes together with its .sig and .att manifests,
// on Debian's docker-registry (tags deleted by digest) and on
// go-containerregistry's registry; another image's signature stays; a
// second delete finds nothing and does not fail.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	sv := newKeys(t, "pw").sv
	hosts := map[string]string{"in-process": registrytest.NewInProcess(t)}
	if !testing.Short() { // Debian's docker-registry is left out by -short
		hosts["docker-registry"] = registrytest.NewDistribution(t).Addr()
	}
	for which, host := range hosts {
		t.Run(which, func(t *testing.T) {
			push := func(tag string) name.Digest {
				img, _ := random.Image(64, 1)
				d := registrytest.Push(t, host+"/templates/gc:"+tag, img)
				if _, err := sign.Sign(ctx, d, sv, sign.WithOfflineNoTlog()); err != nil {
					t.Fatal(err)
				}
				st, _ := attest.New(d.Context().Name(), d.DigestStr(), "https://example.com/p", []byte(`{"a":1}`))
				b, _ := attest.Marshal(st)
				if _, err := sign.Attest(ctx, d, sv, b, sign.WithOfflineNoTlog()); err != nil {
					t.Fatal(err)
				}
				return d
			}
			old, keep := push("old"), push("keep")
			got, err := sign.Delete(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			if got.Image != old.String() || got.Signatures == "" || got.Attestations == "" {
				t.Errorf("deleted %+v", got)
			}
			if _, err := remote.Head(old); err == nil {
				t.Error("the image is still there")
			}
			if _, err := sign.Verify(ctx, old, sv, sign.WithOfflineNoTlog()); err == nil {
				t.Error("its signature still verifies")
			}
			if _, err := sign.Verify(ctx, keep, sv, sign.WithOfflineNoTlog()); err != nil {
				t.Errorf("the other image's signature: %v", err)
			}
			if _, err := sign.VerifyAttestations(ctx, keep, sv, sign.WithOfflineNoTlog()); err != nil {
				t.Errorf("the other image's attestation: %v", err)
			}
			again, err := sign.Delete(ctx, old)
			if err != nil || again.Image != "" || again.Signatures != "" {
				t.Errorf("second delete: %+v, %v", again, err)
			}
		})
	}
}
