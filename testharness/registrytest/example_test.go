package registrytest_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// A push through a fault proxy whose registry rate-limits the first manifest
// upload: the client must retry to succeed. In a test, NewDistribution(t) and
// StartFaultProxy(t, url) do the setup and cleanup in two lines.
func Example() {
	dir, err := os.MkdirTemp("", "registrytest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	reg, err := registrytest.StartDistribution(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	proxy, err := registrytest.NewFaultProxy(reg.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer proxy.Close()

	proxy.Inject(registrytest.Rule{
		Method:       http.MethodPut,
		PathContains: "/manifests/",
		Times:        1,
		Fault:        registrytest.TooManyRequests("0"),
	})

	img, err := random.Image(256, 1)
	if err != nil {
		log.Fatal(err)
	}
	ref, err := name.ParseReference(proxy.Addr() + "/example/app:v1")
	if err != nil {
		log.Fatal(err)
	}
	retry := remote.WithRetryBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3})
	if err := remote.Write(ref, img, retry); err != nil {
		log.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		log.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pushed:", desc.Digest == want)
	fmt.Println("faults served:", proxy.Faults())
	for _, r := range proxy.Log() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/manifests/") {
			fmt.Println(r.Method, r.Path, r.Status)
		}
	}
	// Output:
	// pushed: true
	// faults served: 1
	// PUT /v2/example/app/manifests/v1 429
	// PUT /v2/example/app/manifests/v1 201
}
