package resolve_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// A registry resolver, stacked with a cache, de-duplication and a per-registry
// limit, recording every pin into a lock.
func Example() {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tag, _ := name.NewTag(host + "/demo:v1")
	if err := remote.Write(tag, empty.Image); err != nil {
		panic(err)
	}

	reg, err := resolve.NewRegistry()
	if err != nil {
		panic(err)
	}
	lock := resolve.NewLock()
	r := resolve.Record(resolve.Stack(reg, resolve.DefaultConcurrency), lock)

	in, _ := ref.Parse(host + "/demo:v1")
	pin, err := r.Resolve(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(pin.Tag, pin.Digest)
	fmt.Println(len(lock.Entries()), "lock entry")
	// Output:
	// v1 sha256:732112270d7e59418a8c080b134b24cabd67d250d0d0147a97ed95ba5c280aa4
	// 1 lock entry
}
