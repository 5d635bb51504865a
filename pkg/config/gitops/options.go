package gitops

import (
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Option configures Open.
type Option func(*options) error

type options struct {
	auth       transport.AuthMethod
	tokenFile  string // EnvTokenFile, read before each fetch or push
	tokenUser  string // the basic-auth user sent with its token
	cacheDir   string
	depth      int
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
	author     Signature
	now        func() time.Time
}

func defaultOptions() options {
	return options{
		depth:      1,
		attempts:   16,
		backoff:    50 * time.Millisecond,
		maxBackoff: 16 * 50 * time.Millisecond,
		author:     Signature{Name: "slipway", Email: "slipway@localhost"},
		now:        time.Now,
	}
}

// WithAuth sets the transport credentials (default: from the environment,
// see authFromEnv).
func WithAuth(a transport.AuthMethod) Option {
	return func(o *options) error { o.auth = a; return nil }
}

// WithCacheDir keeps a bare clone in dir between runs and fetches into it,
// instead of cloning into memory each time.
func WithCacheDir(dir string) Option {
	return func(o *options) error { o.cacheDir = dir; return nil }
}

// WithDepth sets the fetch depth (default 1: only the head is needed to
// edit and push; 0 fetches the whole history).
func WithDepth(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("gitops: depth %d < 0", n)
		}
		o.depth = n
		return nil
	}
}

// WithRetry bounds the fetch-edit-push rounds of one Update (default 16)
// and sets the first backoff (default 50ms), which doubles each round up to
// 16 times itself; each wait is half fixed, half random.
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || backoff <= 0 {
			return fmt.Errorf("gitops: retry needs at least 1 attempt and a positive backoff")
		}
		o.attempts, o.backoff, o.maxBackoff = attempts, backoff, 16*backoff
		return nil
	}
}

// WithAuthor sets the default commit author.
func WithAuthor(s Signature) Option {
	return func(o *options) error {
		if s.Name == "" || s.Email == "" {
			return fmt.Errorf("gitops: author needs a name and an email")
		}
		o.author = s
		return nil
	}
}
