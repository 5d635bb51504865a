package resolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// Registry resolves references by asking their registry: HEAD for the
// manifest digest, falling back to GET when the registry omits
// Docker-Content-Digest or refuses HEAD. Registries on loopback and private
// addresses are reached over plain HTTP, as go-containerregistry does.
type Registry struct {
	puller   *remote.Puller
	platform *v1.Platform
}

var _ Resolver = (*Registry)(nil)

type registryOptions struct {
	keychain  authn.Keychain
	transport http.RoundTripper
	retry     RetryPolicy
	platform  *v1.Platform
	userAgent string
}

// Option configures NewRegistry.
type Option func(*registryOptions) error

// WithKeychain sets where credentials come from (default: the docker
// credential keychain, ~/.docker/config.json and its helpers).
func WithKeychain(k authn.Keychain) Option {
	return func(o *registryOptions) error {
		if k == nil {
			return errors.New("nil keychain")
		}
		o.keychain = k
		return nil
	}
}

// WithTransport sets the base HTTP transport, below retries and auth.
func WithTransport(t http.RoundTripper) Option {
	return func(o *registryOptions) error {
		if t == nil {
			return errors.New("nil transport")
		}
		o.transport = t
		return nil
	}
}

// WithRetry sets the retry policy (default DefaultRetryPolicy).
func WithRetry(p RetryPolicy) Option {
	return func(o *registryOptions) error {
		if err := p.validate(); err != nil {
			return err
		}
		o.retry = p
		return nil
	}
}

// WithPlatform pins one platform's manifest ("linux/arm64", "linux/arm/v7")
// instead of the index digest. Empty means the index (the default).
func WithPlatform(platform string) Option {
	return func(o *registryOptions) error {
		if platform == "" {
			o.platform = nil
			return nil
		}
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return fmt.Errorf("platform %q: %w", platform, err)
		}
		o.platform = p
		return nil
	}
}

// WithUserAgent sets the User-Agent sent to registries.
func WithUserAgent(ua string) Option {
	return func(o *registryOptions) error { o.userAgent = ua; return nil }
}

// NewTransport returns a base transport sized for concurrent registry look-ups:
// enough idle connections per host that a concurrency limit of maxConns does
// not churn connections.
func NewTransport(maxConns int) *http.Transport {
	if maxConns < 2 {
		maxConns = 2
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * maxConns,
		MaxIdleConnsPerHost:   maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// NewRegistry returns a registry resolver.
func NewRegistry(opts ...Option) (*Registry, error) {
	o := registryOptions{keychain: authn.DefaultKeychain, retry: DefaultRetryPolicy, userAgent: "slipway"}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.transport == nil {
		o.transport = NewTransport(DefaultConcurrency)
	}
	ropts := []remote.Option{
		remote.WithAuthFromKeychain(o.keychain),
		// One ping per registry, not one per repository.
		remote.WithTransport(newRetryTransport(NewPingCache(o.transport), o.retry)),
		// Retries are ours (Retry-After, per-host cool-down, bounded attempts): switch go-containerregistry's off.
		remote.WithRetryStatusCodes(),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithUserAgent(o.userAgent),
	}
	if o.platform != nil {
		ropts = append(ropts, remote.WithPlatform(*o.platform))
	}
	p, err := remote.NewPuller(ropts...)
	if err != nil {
		return nil, err
	}
	return &Registry{puller: p, platform: o.platform}, nil
}

// Resolve implements Resolver.
func (g *Registry) Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error) {
	origin := ref.Origin{Source: ref.SourceRegistry, Registry: r.Registry()}
	if r.IsPinned() {
		origin.Source = ref.SourceWritten
		return ref.PinOf(r, r.Digest(), origin), nil
	}
	if g.platform != nil {
		return g.resolvePlatform(ctx, r, origin)
	}
	desc, err := g.puller.Head(ctx, r.Target())
	if err != nil && headFallback(err) {
		var d *remote.Descriptor
		if d, err = g.puller.Get(ctx, r.Target()); err == nil {
			desc = &d.Descriptor
		}
	}
	if err != nil {
		return ref.Pin{}, classify(r, err)
	}
	origin.MediaType = string(desc.MediaType)
	return ref.PinOf(r, desc.Digest.String(), origin), nil
}

func (g *Registry) resolvePlatform(ctx context.Context, r ref.Reference, origin ref.Origin) (ref.Pin, error) {
	want := *g.platform
	d, err := g.puller.Get(ctx, r.Target())
	if err != nil {
		return ref.Pin{}, classify(r, err)
	}
	origin.Platform = want.String()
	if d.MediaType.IsIndex() {
		idx, err := d.ImageIndex()
		if err != nil {
			return ref.Pin{}, classify(r, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return ref.Pin{}, classify(r, err)
		}
		var seen []string
		for _, m := range im.Manifests {
			if m.Platform == nil {
				continue
			}
			if m.Platform.Satisfies(want) {
				origin.MediaType = string(m.MediaType)
				return ref.PinOf(r, m.Digest.String(), origin), nil
			}
			seen = append(seen, m.Platform.String())
		}
		return ref.Pin{}, &Error{Ref: r.String(), Kind: ErrPlatform, Err: fmt.Errorf("index %s offers %v, not %s", d.Digest, seen, want.String())}
	}
	img, err := d.Image()
	if err != nil {
		return ref.Pin{}, classify(r, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return ref.Pin{}, classify(r, err)
	}
	if got := cf.Platform(); got == nil || !got.Satisfies(want) {
		return ref.Pin{}, &Error{Ref: r.String(), Kind: ErrPlatform, Err: fmt.Errorf("single-platform manifest %s is %v, not %s", d.Digest, got, want.String())}
	}
	origin.MediaType = string(d.MediaType)
	return ref.PinOf(r, d.Digest.String(), origin), nil
}

// headFallback says whether a failed HEAD is worth a GET: a missing digest
// header, a refused method, or a 4xx whose body (absent on HEAD) carries the
// registry's answer. Not after the retry bound was already spent.
func headFallback(err error) bool {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode < 500 && te.StatusCode != http.StatusTooManyRequests
	}
	return true
}

// Error is a failed resolution: the reference, the error family, and the
// registry's answer.
type Error struct {
	Ref  string
	Kind error // ErrNotFound, ErrUnavailable, ErrDenied, ErrNotInLock, ErrPlatform, or nil
	Err  error
	// said is the registry's answer in words, when Err is its raw error
	// (a transport error prints Go map syntax and the request URL).
	said string
}

func (e *Error) Error() string {
	cause := e.said
	if cause == "" {
		cause = e.Err.Error()
	}
	if e.Kind == nil {
		return fmt.Sprintf("resolve %s: %s", e.Ref, cause)
	}
	return fmt.Sprintf("resolve %s: %v: %s", e.Ref, e.Kind, cause)
}

// registrySaid is a registry's error in words: each diagnostic's message
// with what it is about ("manifest unknown: tag v9 not found in
// host/repo"), never go-containerregistry's rendering of its detail as a Go
// map; the status when the registry sent no diagnostic.
func registrySaid(r ref.Reference, te *transport.Error) string {
	repo := r.Name()
	what := "tag " + r.TagOrDefault()
	if r.Digest() != "" {
		what = "digest " + r.Digest()
	}
	var parts []string
	for _, d := range te.Errors {
		msg := strings.ToLower(strings.TrimSpace(d.Message))
		if msg == "" {
			msg = strings.ToLower(strings.ReplaceAll(string(d.Code), "_", " "))
		}
		switch d.Code {
		case transport.ManifestUnknownErrorCode:
			msg += ": " + what + " not found in " + repo
		case transport.NameUnknownErrorCode:
			msg += ": repository " + r.Repository() + " not found on " + r.Registry()
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			msg += ": " + repo + " (check the registry credentials: docker login, or the keychain in use)"
		case transport.TooManyRequestsErrorCode:
			msg += ": " + r.Registry() + " is rate limiting"
		default:
			msg += ": " + repo
		}
		parts = append(parts, msg)
	}
	if len(parts) == 0 {
		status := http.StatusText(te.StatusCode)
		if status == "" {
			status = "status " + strconv.Itoa(te.StatusCode)
		}
		return fmt.Sprintf("registry %s answered %d %s for %s", r.Registry(), te.StatusCode, strings.ToLower(status), what+" of "+repo)
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the family and the cause.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

func classify(r ref.Reference, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	kind := error(nil)
	var te *transport.Error
	switch {
	case errors.Is(err, ErrUnavailable):
		// already in the family; keep it out of Kind to avoid saying it twice
		return &Error{Ref: r.String(), Err: err}
	case errors.As(err, &te):
		switch {
		case te.StatusCode == http.StatusNotFound:
			kind = ErrNotFound
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			kind = ErrDenied
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
			kind = ErrUnavailable
		}
	}
	e = &Error{Ref: r.String(), Kind: kind, Err: err}
	if te != nil {
		e.said = registrySaid(r, te)
	}
	return e
}
