package sign

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"

	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// Option configures Sign and Verify.
type Option func(*options) error

// tlogMode says how a call deals with the transparency log. The zero value
// is "not chosen", which Sign and Verify refuse.
type tlogMode int

const (
	tlogUnset tlogMode = iota
	// tlogOfflineNone: no transparency log at all; signatures are checked
	// against the key only.
	tlogOfflineNone
)

func (m tlogMode) String() string {
	switch m {
	case tlogOfflineNone:
		return "offline-no-tlog"
	default:
		return "unset"
	}
}

type options struct {
	keychain    authn.Keychain
	transport   http.RoundTripper
	tlog        tlogMode
	annotations map[string]any
	bundle      bool
	session     *Session
}

func makeOptions(opts []Option) (*options, error) {
	o, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.session == nil {
		s, err := newSession(o)
		if err != nil {
			return nil, err
		}
		o.session = s
	}
	return o, nil
}

// parseOptions applies opts and checks the transparency-log choice; it
// makes no session.
func parseOptions(opts []Option) (*options, error) {
	o := &options{keychain: authn.DefaultKeychain}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if o.tlog == tlogUnset {
		return nil, ErrTlogChoice
	}
	return o, nil
}

// Session shares registry clients across calls: one ping per registry and
// one token per repository, instead of one of each per request. Calls without
// WithSession make a session of their own, shared by the reads and writes
// of that call.
type Session struct {
	puller *remote.Puller
	pusher *remote.Pusher
}

// sessionJobs bounds a session's concurrent blob reads and uploads.
const sessionJobs = 64

// NewSession makes a session with the keychain and transport of opts
// (other options are ignored here).
func NewSession(opts ...Option) (*Session, error) {
	o := &options{keychain: authn.DefaultKeychain}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return newSession(o)
}

func newSession(o *options) (*Session, error) {
	base := o.transport
	if base == nil {
		base = remote.DefaultTransport
	}
	// go-containerregistry lets a client read 4 blobs at a time (WithJobs);
	// a session is shared by many concurrent calls, whose callers bound
	// their own concurrency, so the client must not be the bottleneck.
	ro := []remote.Option{remote.WithAuthFromKeychain(o.keychain), remote.WithTransport(resolve.NewPingCache(base)), remote.WithJobs(sessionJobs)}
	pl, err := remote.NewPuller(ro...)
	if err != nil {
		return nil, fmt.Errorf("%w: registry client: %w", ErrInput, err)
	}
	ps, err := remote.NewPusher(ro...)
	if err != nil {
		return nil, fmt.Errorf("%w: registry client: %w", ErrInput, err)
	}
	return &Session{puller: pl, pusher: ps}, nil
}

// WithSession makes calls share s's registry clients (see Session).
func WithSession(s *Session) Option {
	return func(o *options) error {
		if s == nil {
			return fmt.Errorf("%w: nil session", ErrInput)
		}
		o.session = s
		return nil
	}
}

// WithOfflineNoTlog chooses to sign without uploading to a transparency log
// and to verify against the public key alone, with no log entry, no
// certificate and no network call for a trust root. This is what
// "cosign sign --tlog-upload=false" and "cosign verify --insecure-ignore-tlog"
// do. It must be chosen explicitly: without it Sign and Verify refuse to run.
// Keyless signing and log verification are the pluggable path for later.
func WithOfflineNoTlog() Option {
	return func(o *options) error { o.tlog = tlogOfflineNone; return nil }
}

// WithBundle adds the Sigstore bundle v0.3, stored as an OCI referrer of the
// digest, beside cosign's classic tags.
//
// Sign and Attest with it also store their result as a bundle (DSSE over an
// in-toto statement, the key's hint as verification material, no
// transparency-log entry) in a manifest whose subject is the digest, as
// "cosign sign/attest --new-bundle-format --key" does; the tag write
// happens as before. A repeat call stores nothing when a bundle that
// verifies with the same key is already there (for Attest: one carrying
// the same statement) and reports it Unchanged. Where the registry has the
// OCI 1.1 referrers API the registry lists the bundle; elsewhere (Debian's
// docker-registry 2.8) the referrers tag schema "sha256-<hex>" lists it.
//
// Verify and VerifyAttestations with it require at least one bundle that
// verifies, and return the tag's entries beside it. Without it they still
// read bundles (see Verify and VerifyAttestations). Signatures in bundles
// carry no annotations, so WithBundle and WithAnnotations together are
// refused by Sign and Verify.
func WithBundle() Option {
	return func(o *options) error { o.bundle = true; return nil }
}

// WithKeychain sets where registry credentials come from (default: the
// docker credential keychain).
func WithKeychain(k authn.Keychain) Option {
	return func(o *options) error {
		if k == nil {
			return fmt.Errorf("%w: nil keychain", ErrInput)
		}
		o.keychain = k
		return nil
	}
}

// WithTransport sets the HTTP transport used to reach the registry.
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) error {
		if t == nil {
			return fmt.Errorf("%w: nil transport", ErrInput)
		}
		o.transport = t
		return nil
	}
}

// WithAnnotations adds optional claims to the signed payload ("optional" in
// simple signing). Verify with the same option requires them to be present
// with these values.
func WithAnnotations(a map[string]string) Option {
	return func(o *options) error {
		if len(a) == 0 {
			return nil
		}
		if o.annotations == nil {
			o.annotations = make(map[string]any, len(a))
		}
		for k, v := range a {
			if k == "" {
				return fmt.Errorf("%w: empty annotation key", ErrInput)
			}
			o.annotations[k] = v
		}
		return nil
	}
}

// bundleWithoutAnnotations refuses WithBundle together with WithAnnotations
// for signatures: a signature bundle's statement has no place for them.
func (o *options) bundleWithoutAnnotations() error {
	if o.bundle && len(o.annotations) > 0 {
		return fmt.Errorf("%w: WithBundle and WithAnnotations: signatures in bundles carry no annotations", ErrInput)
	}
	return nil
}

func (o *options) remote(ctx context.Context) []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(o.ggcr(ctx)...)}
}

// ggcr returns go-containerregistry options for one call: the session's
// clients (auth and transport are theirs) and the call's context.
func (o *options) ggcr(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.Reuse(o.session.puller), remote.Reuse(o.session.pusher)}
}
