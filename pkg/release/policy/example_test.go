package policy_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

func Example() {
	// A registry, an image, and a key pair.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, _ := random.Image(64, 1)
	tag, _ := name.NewTag(host + "/runners/agent:v1")
	_ = remote.Write(tag, img)
	h, _ := img.Digest()
	digest := tag.Context().Digest(h.String())
	priv, pub, _ := sign.GenerateKeys([]byte("example"))
	sv, _ := sign.LoadSigner(priv, []byte("example"))

	p, err := policy.Parse([]byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata:
  name: runners
spec:
  transparencyLog: none
  keys:
    - name: ci
      publicKey: |
` + indent(string(pub), "        ") + `
  rules:
    - name: runners
      match:
        kinds: [runner]
      signatures:
        keys: [ci]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func() {
		res, err := p.Verify(context.Background(), policy.Target{Ref: digest.String(), Kind: "runner"})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("verified:", res.Verified)
		for _, c := range res.Checks {
			fmt.Printf("  %s passed=%v\n", c.Name, c.Passed)
		}
	}
	show() // not signed yet
	if _, err := sign.Sign(context.Background(), digest, sv, sign.WithOfflineNoTlog()); err != nil {
		fmt.Println(err)
		return
	}
	show()

	// A rule that requires nothing is refused unless it says so.
	_, err = policy.Parse([]byte("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: lax}\nspec:\n  transparencyLog: none\n  rules:\n    - name: all\n"))
	fmt.Println(err)
	// Output:
	// verified: false
	//   reference passed=true
	//   rules passed=true
	//   signature passed=false
	// verified: true
	//   reference passed=true
	//   rules passed=true
	//   signature passed=true
	// <policy>:7: spec.rules[0]: invalid verification policy: rule "all" requires nothing (no signatures, no attestations): unsafe; set allowUnverified: true if that is meant
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pre)
}
