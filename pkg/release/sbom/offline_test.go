package sbom

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/anchore/syft/syft"
)

// TestOfflineConfig asserts the syft settings that keep cataloging off the network and off the
// host's caches, whatever the environment says (GOPROXY and friends feed syft's Go defaults).
func TestOfflineConfig(t *testing.T) {
	t.Setenv("GOPROXY", "https://proxy.example.invalid")
	t.Setenv("GOPRIVATE", "example.invalid/*")
	o, err := newOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := syftConfig(o).Packages
	for name, on := range map[string]bool{
		"golang.SearchRemoteLicenses":        p.Golang.SearchRemoteLicenses,
		"golang.SearchLocalModCacheLicenses": p.Golang.SearchLocalModCacheLicenses,
		"golang.SearchLocalVendorLicenses":   p.Golang.SearchLocalVendorLicenses,
		"golang.UsePackagesLib":              p.Golang.UsePackagesLib,
		"golang.Proxies set":                 len(p.Golang.Proxies) > 0,
		"golang.NoProxy set":                 len(p.Golang.NoProxy) > 0,
		"golang.LocalModCacheDir set":        p.Golang.LocalModCacheDir != "",
		"java.UseNetwork":                    p.JavaArchive.UseNetwork,
		"java.UseMavenLocalRepository":       p.JavaArchive.UseMavenLocalRepository,
		"java.MavenLocalRepositoryDir set":   p.JavaArchive.MavenLocalRepositoryDir != "",
		"java.ResolveTransitiveDependencies": p.JavaArchive.ResolveTransitiveDependencies,
		"javascript.SearchRemoteLicenses":    p.JavaScript.SearchRemoteLicenses,
		"python.SearchRemoteLicenses":        p.Python.SearchRemoteLicenses,
	} {
		if on {
			t.Errorf("%s is on", name)
		}
	}
}

// recorder is an HTTP server that counts every request made to it, as a registry, a Go module proxy
// or an HTTP proxy (CONNECT), and answers 404.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.Host+req.URL.Path)
		r.mu.Unlock()
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// TestOfflineGenerate catalogs the fixture (a Go binary with a dependency module, an npm and a
// Python package) with every remote endpoint syft knows, and the HTTP(S) proxies, pointed at a
// recording server, and expects no request. The control case turns the Go licence lookup back on
// and expects requests, which shows the recorder would have seen them.
func TestOfflineGenerate(t *testing.T) {
	root := writeFixture(t)
	copyFile(t, buildTiny(t, t.TempDir()), filepath.Join(root, "usr/local/bin/tiny"), 0o755)

	rec := newRecorder(t)
	// any client that honours the proxy variables and has not read them yet goes to the recorder
	t.Setenv("HTTP_PROXY", rec.URL)
	t.Setenv("HTTPS_PROXY", rec.URL)
	t.Setenv("NO_PROXY", "")
	endpoints := func(cfg *syft.CreateSBOMConfig) {
		cfg.Packages.Golang.Proxies = []string{rec.URL}
		cfg.Packages.JavaScript.NPMBaseURL = rec.URL
		cfg.Packages.Python.PypiBaseURL = rec.URL
		cfg.Packages.JavaArchive.MavenBaseURL = rec.URL
	}

	// one licence matcher for both runs, compiled before the proxies point at the recorder
	ctx, err := Prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(ctx, root, withConfigHook(endpoints)); err != nil {
		t.Fatal(err)
	}
	if got := rec.requests(); len(got) != 0 {
		t.Errorf("offline generate made requests: %q", got)
	}

	remote := func(cfg *syft.CreateSBOMConfig) {
		endpoints(cfg)
		cfg.Packages.Golang.SearchRemoteLicenses = true
	}
	if _, err := Generate(ctx, root, withConfigHook(remote)); err != nil {
		t.Fatal(err)
	}
	if got := rec.requests(); len(got) == 0 {
		t.Error("control: with remote Go licences on, the recorder saw no request")
	} else {
		t.Logf("control: with remote Go licences on, the recorder saw %q", got)
	}
}
