package ref_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/ref"
)

func ExampleParse() {
	r, err := ref.Parse("nginx:1.25")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Registry(), r.Repository(), r.Tag(), r.IsPinned())
	fmt.Println(r.Canonical())

	p := ref.PinOf(r, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ref.Origin{Source: ref.SourceRegistry})
	fmt.Println(p)
	// Output:
	// index.docker.io library/nginx 1.25 false
	// index.docker.io/library/nginx:1.25
	// nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
}
