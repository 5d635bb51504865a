package sign_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

func Example() {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	// An image to sign, pushed by digest.
	img, _ := random.Image(128, 1)
	h, _ := img.Digest()
	ref, err := sign.ParseDigest(host + "/demo@" + h.String())
	if err != nil {
		log.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		log.Fatal(err)
	}

	// A key pair, as "cosign generate-key-pair" makes it.
	password := []byte("from-the-environment")
	priv, pub, err := sign.GenerateKeys(password)
	if err != nil {
		log.Fatal(err)
	}
	signer, err := sign.LoadSigner(priv, password)
	if err != nil {
		log.Fatal(err)
	}
	verifier, err := sign.LoadVerifier(pub)
	if err != nil {
		log.Fatal(err)
	}

	for range 2 {
		res, err := sign.Sign(ctx, ref, signer, sign.WithOfflineNoTlog())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("sign:", res.Status, "verified:", res.Verified, res.Tlog)
	}

	v, err := sign.Verify(ctx, ref, verifier, sign.WithOfflineNoTlog())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verify:", len(v.Signatures), "signature(s), tag", path.Ext(v.SignatureTag.TagStr()))

	if _, err := sign.ParseDigest(host + "/demo:latest"); err != nil {
		fmt.Println("tag refused:", strings.Contains(err.Error(), "not a digest reference"))
	}
	// Output:
	// sign: created verified: true offline-no-tlog
	// sign: unchanged verified: true offline-no-tlog
	// verify: 1 signature(s), tag .sig
	// tag refused: true
}
