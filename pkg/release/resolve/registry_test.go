package resolve_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// server is go-containerregistry's in-process registry behind an optional
// middleware that changes how the real server answers (a registry variant,
// not a mock: every request still reaches the real handler unless the
// middleware answers a fault itself).
type server struct {
	*httptest.Server
	host     string
	requests atomic.Int64
	inFlight atomic.Int64
	peak     atomic.Int64
}

func newServer(t *testing.T, mw func(http.Handler) http.Handler) *server {
	t.Helper()
	s := &server{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if mw != nil {
		h = mw(h)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/") && r.URL.Path != "/v2/" {
			s.requests.Add(1)
		}
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			p := s.peak.Load()
			if n <= p || s.peak.CompareAndSwap(p, n) {
				break
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	s.host = strings.TrimPrefix(s.URL, "http://")
	return s
}

func (s *server) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	return registrytest.Push(t, s.host+"/"+repoTag, img).DigestStr()
}

func parse(t *testing.T, s string) ref.Reference {
	t.Helper()
	r, err := ref.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fastRetry(attempts int) resolve.Option {
	return resolve.WithRetry(resolve.RetryPolicy{Attempts: attempts, Base: 5 * time.Millisecond, Max: 20 * time.Millisecond, MaxRetryAfter: 5 * time.Second})
}

func newRegistry(t *testing.T, opts ...resolve.Option) *resolve.Registry {
	t.Helper()
	opts = append([]resolve.Option{resolve.WithKeychain(authn.NewMultiKeychain())}, opts...)
	r, err := resolve.NewRegistry(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func randomImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestRegistryResolvesTagKeepingSpelling(t *testing.T) {
	s := newServer(t, nil)
	want := s.push(t, "team/app:v1", randomImage(t))
	r := newRegistry(t)
	p, err := r.Resolve(context.Background(), parse(t, s.host+"/team/app:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != want || p.Tag != "v1" || p.Name != s.host+"/team/app" {
		t.Fatalf("pin = %+v, want digest %s tag v1", p, want)
	}
	if p.Origin.Source != ref.SourceRegistry || p.Origin.Registry != s.host || p.Origin.MediaType == "" {
		t.Fatalf("origin = %+v", p.Origin)
	}
	if got := p.String(); got != s.host+"/team/app:v1@"+want {
		t.Fatalf("String() = %s", got)
	}
}

func TestRegistryPinnedReferenceAsksNobody(t *testing.T) {
	s := newServer(t, nil)
	r := newRegistry(t)
	d := "sha256:" + strings.Repeat("ab", 32)
	p, err := r.Resolve(context.Background(), parse(t, s.host+"/app:v1@"+d))
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != d || p.Origin.Source != ref.SourceWritten || s.requests.Load() != 0 {
		t.Fatalf("pin %+v after %d requests", p, s.requests.Load())
	}
}

func TestRegistryFallsBackToGetWithoutDigestHeader(t *testing.T) {
	var heads, gets atomic.Int64
	var armed atomic.Bool
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if armed.Load() && strings.Contains(r.URL.Path, "/manifests/") {
				switch r.Method {
				case http.MethodHead:
					heads.Add(1)
					w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
					w.WriteHeader(http.StatusOK) // a registry that omits Docker-Content-Digest
					return
				case http.MethodGet:
					gets.Add(1)
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	want := s.push(t, "app:v1", randomImage(t))
	armed.Store(true)
	p, err := newRegistry(t).Resolve(context.Background(), parse(t, s.host+"/app:v1"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != want || heads.Load() != 1 || gets.Load() != 1 {
		t.Fatalf("digest %s (want %s) after %d HEAD, %d GET", p.Digest, want, heads.Load(), gets.Load())
	}
}

func TestRegistryUnknownTagNamesReferenceAndAnswer(t *testing.T) {
	s := newServer(t, nil)
	s.push(t, "app:v1", randomImage(t))
	_, err := newRegistry(t).Resolve(context.Background(), parse(t, s.host+"/app:v9"))
	if !errors.Is(err, resolve.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if msg := err.Error(); !strings.Contains(msg, s.host+"/app:v9") || !strings.Contains(msg, "unknown manifest: tag v9 not found in "+s.host+"/app") {
		t.Fatalf("error does not name the reference and the registry's answer: %v", err)
	}
	_, err = newRegistry(t).Resolve(context.Background(), parse(t, s.host+"/nope:v1"))
	if !errors.Is(err, resolve.ErrNotFound) || !strings.Contains(err.Error(), "nope:v1") {
		t.Fatalf("unknown repository: %v", err)
	}
}

func TestRegistryPlatform(t *testing.T) {
	s := newServer(t, nil)
	amd, arm := randomImage(t), randomImage(t)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	tag, _ := name.NewTag(s.host + "/multi:v1")
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	armDigest, _ := arm.Digest()

	p, err := newRegistry(t).Resolve(context.Background(), parse(t, s.host+"/multi:v1"))
	if err != nil || p.Digest != idxDigest.String() {
		t.Fatalf("default pins the index: got %v %v, want %s", p.Digest, err, idxDigest)
	}
	p, err = newRegistry(t, resolve.WithPlatform("linux/arm64")).Resolve(context.Background(), parse(t, s.host+"/multi:v1"))
	if err != nil || p.Digest != armDigest.String() || p.Origin.Platform != "linux/arm64" {
		t.Fatalf("--platform linux/arm64: got %+v %v, want %s", p, err, armDigest)
	}
	_, err = newRegistry(t, resolve.WithPlatform("windows/amd64")).Resolve(context.Background(), parse(t, s.host+"/multi:v1"))
	if !errors.Is(err, resolve.ErrPlatform) || !strings.Contains(err.Error(), "linux/arm64/v8") {
		t.Fatalf("missing platform: %v", err)
	}
}

func TestRegistryRetriesAndHonoursRetryAfter(t *testing.T) {
	var n atomic.Int64
	var armed atomic.Bool
	var mu sync.Mutex
	var times []time.Time
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if armed.Load() && strings.Contains(r.URL.Path, "/manifests/") && r.Method == http.MethodHead {
				mu.Lock()
				times = append(times, time.Now())
				mu.Unlock()
				switch n.Add(1) {
				case 1:
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				case 2:
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	want := s.push(t, "app:v1", randomImage(t))
	armed.Store(true)
	p, err := newRegistry(t, fastRetry(5)).Resolve(context.Background(), parse(t, s.host+"/app:v1"))
	if err != nil || p.Digest != want {
		t.Fatalf("got %v %v", p.Digest, err)
	}
	if len(times) != 3 {
		t.Fatalf("%d HEAD requests, want 3 (429, 503, 200)", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Fatalf("retried %v after a 429 with Retry-After: 1", gap)
	}
}

func TestRegistryBoundsAttempts(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				n.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	_, err := newRegistry(t, fastRetry(3)).Resolve(context.Background(), parse(t, s.host+"/app:v1"))
	if !errors.Is(err, resolve.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n.Load() != 3 {
		t.Fatalf("%d attempts, want exactly 3 (no GET fallback after the bound)", n.Load())
	}
}

func TestRegistryDownIsUnavailable(t *testing.T) {
	s := newServer(t, nil)
	host := s.host
	s.Close()
	_, err := newRegistry(t, fastRetry(2)).Resolve(context.Background(), parse(t, host+"/app:v1"))
	if !errors.Is(err, resolve.ErrUnavailable) || !strings.Contains(err.Error(), host+"/app:v1") {
		t.Fatalf("err = %v", err)
	}
}

func TestRegistryLongRetryAfterIsNotAHang(t *testing.T) {
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		})
	})
	_, err := newRegistry(t, fastRetry(5)).Resolve(context.Background(), parse(t, s.host+"/app:v1"))
	if !errors.Is(err, resolve.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestLimitBoundsConcurrencyPerRegistry(t *testing.T) {
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				time.Sleep(20 * time.Millisecond)
			}
			h.ServeHTTP(w, r)
		})
	})
	img := randomImage(t)
	var refs []ref.Reference
	for i := range 24 {
		tag := "v" + string(rune('a'+i))
		s.push(t, "app:"+tag, img)
		refs = append(refs, parse(t, s.host+"/app:"+tag))
	}
	s.peak.Store(0)
	r := resolve.Limit(newRegistry(t), 4)
	var wg sync.WaitGroup
	errs := make(chan error, len(refs))
	for _, rf := range refs {
		wg.Go(func() {
			if _, err := r.Resolve(context.Background(), rf); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := s.peak.Load(); p > 4 || p < 2 {
		t.Fatalf("peak in flight %d, want 2..4", p)
	}
}

func TestDedupeAndCacheShareOneLookup(t *testing.T) {
	s := newServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				time.Sleep(50 * time.Millisecond)
			}
			h.ServeHTTP(w, r)
		})
	})
	want := s.push(t, "app:v1", randomImage(t))
	s.requests.Store(0)
	r := resolve.Stack(newRegistry(t), 8)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			p, err := r.Resolve(context.Background(), parse(t, s.host+"/app:v1"))
			if err != nil || p.Digest != want {
				t.Errorf("got %v %v", p.Digest, err)
			}
		})
	}
	wg.Wait()
	if _, err := r.Resolve(context.Background(), parse(t, s.host+"/app:v1")); err != nil {
		t.Fatal(err)
	}
	if got := s.requests.Load(); got != 1 {
		t.Fatalf("%d manifest requests for one reference, want 1", got)
	}
}

// countPaths counts requests per URL path.
type countPaths struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countPaths) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Scheme+" "+r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestOnePingPerRegistry: resolving references in several repositories of
// one registry pings it once (after one https attempt on a plain-HTTP
// registry), not once per repository.
func TestOnePingPerRegistry(t *testing.T) {
	host := registrytest.NewInProcess(t)
	for _, repo := range []string{"a", "b", "c", "d"} {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		registrytest.Push(t, host+"/"+repo+":v1", img)
	}
	c := &countPaths{n: map[string]int{}}
	reg, err := resolve.NewRegistry(resolve.WithTransport(c))
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"a", "b", "c", "d"} {
		r, err := ref.Parse(host + "/" + repo + ":v1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Resolve(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.n["http /v2/"] + c.n["https /v2/"]; got != 2 {
		t.Errorf("pings %v, want one https attempt and one http ping", c.n)
	}
}
