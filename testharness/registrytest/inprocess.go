package registrytest

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// NewInProcess starts go-containerregistry's in-process registry on
// 127.0.0.1 for the life of the test and returns its host:port. It is the
// embedded default; Distribution is the real server for integration tests.
func NewInProcess(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push writes img to ref (host/repository:tag) and returns the digest
// reference it now has; it fails the test on any error.
func Push(tb testing.TB, ref string, img v1.Image) name.Digest {
	tb.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		tb.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return tag.Context().Digest(d.String())
}
