package template

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/pkg/release/scan"
)

// Source fetches a base image by digest.
type Source interface {
	Image(ctx context.Context, r ref.Reference) (v1.Image, error)
}

// Remote is the registry Source (go-containerregistry remote).
type Remote struct{ Options []remote.Option }

var _ Source = Remote{}

// Image fetches r by digest; go-containerregistry verifies the bytes against it.
func (s Remote) Image(ctx context.Context, r ref.Reference) (v1.Image, error) {
	return remote.Image(r.Context().Digest(r.Digest()), append([]remote.Option{remote.WithContext(ctx)}, s.Options...)...)
}

type options struct {
	epoch    *time.Time
	resolver resolve.Resolver
	source   Source
	workDir  string
	keep     bool
	allow    []scan.Allow
	log      io.Writer
}

// Option configures Build.
type Option func(*options) error

// WithEpoch is the time every timestamp is clamped to when the spec sets no
// sourceDateEpoch; the CLI passes SOURCE_DATE_EPOCH. Default: the Unix epoch.
func WithEpoch(t time.Time) Option {
	return func(o *options) error { t = t.UTC(); o.epoch = &t; return nil }
}

// WithResolveBase accepts a base given by tag and pins it with r; the pin is
// recorded in the result. Without it a tag is refused.
func WithResolveBase(r resolve.Resolver) Option {
	return func(o *options) error {
		if r == nil {
			return errors.New("nil resolver")
		}
		o.resolver = r
		return nil
	}
}

// WithSource sets where the base image comes from (default: the registry).
func WithSource(s Source) Option {
	return func(o *options) error {
		if s == nil {
			return errors.New("nil source")
		}
		o.source = s
		return nil
	}
}

// WithWorkDir builds under dir (which must exist) instead of a new temporary directory.
func WithWorkDir(dir string) Option { return func(o *options) error { o.workDir = dir; return nil } }

// WithKeepWorkDir keeps the build's working directory (the unpacked and the
// frozen rootfs) for inspection; Result.WorkDir says where.
func WithKeepWorkDir() Option { return func(o *options) error { o.keep = true; return nil } }

// WithAllow adds scan exemptions to the spec's own; each use is recorded in the result.
func WithAllow(a ...scan.Allow) Option {
	return func(o *options) error { o.allow = append(o.allow, a...); return nil }
}

// WithLog writes one line per build phase to w.
func WithLog(w io.Writer) Option { return func(o *options) error { o.log = w; return nil } }

// Layout is a Source reading base images from an OCI image layout directory,
// for builds with no registry at all; the repository part of the reference is
// not consulted, only its digest.
type Layout struct{ Path string }

var _ Source = Layout{}

// Image finds r's digest in the layout.
func (s Layout) Image(_ context.Context, r ref.Reference) (v1.Image, error) {
	p, err := layout.FromPath(s.Path)
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: %w", s.Path, err)
	}
	h, err := v1.NewHash(r.Digest())
	if err != nil {
		return nil, err
	}
	img, err := p.Image(h)
	if err != nil {
		return nil, fmt.Errorf("oci layout %s: %s: %w", s.Path, r.Digest(), err)
	}
	return img, nil
}
