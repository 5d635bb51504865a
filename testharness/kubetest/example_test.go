package kubetest_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// Binary finds the binaries `make kube-bins` builds under the cache
// directory ($SLIPWAY_KUBE_CACHE here) by version, and when one is absent
// says so with an error matching ErrNotBuilt that names the make target:
// what New skips a test with. No cluster is started.
func ExampleBinary() {
	cache, err := os.MkdirTemp("", "kubetest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	old, had := os.LookupEnv("SLIPWAY_KUBE_CACHE")
	os.Setenv("SLIPWAY_KUBE_CACHE", cache)
	defer func() {
		if had {
			os.Setenv("SLIPWAY_KUBE_CACHE", old)
		} else {
			os.Unsetenv("SLIPWAY_KUBE_CACHE")
		}
	}()

	_, err = kubetest.Binary("kube-apiserver")
	fmt.Println("not built:", errors.Is(err, kubetest.ErrNotBuilt))
	fmt.Println(err.Error()[len("kubetest: ")+len(cache):])

	// What `make kube-bins` leaves: an executable under <cache>/<version>/bin.
	bin := filepath.Join(cache, kubetest.KubeVersion, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kube-apiserver"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		log.Fatal(err)
	}
	p, err := kubetest.Binary("kube-apiserver")
	if err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(cache, p)
	fmt.Println("found:", rel)

	_, err = kubetest.Binary("kubectl")
	fmt.Println(err)
	// Output:
	// not built: true
	// /v1.37.2/bin/kube-apiserver not built (kube-apiserver): run make kube-bins
	// found: v1.37.2/bin/kube-apiserver
	// kubetest: unknown binary "kubectl"
}
