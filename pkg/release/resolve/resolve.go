package resolve

import (
	"context"
	"errors"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// Resolver turns a reference into a Pin. A reference that already carries a
// digest resolves to that digest without asking anyone.
type Resolver interface {
	Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error)
}

// Func adapts a function to a Resolver.
type Func func(ctx context.Context, r ref.Reference) (ref.Pin, error)

// Resolve calls f.
func (f Func) Resolve(ctx context.Context, r ref.Reference) (ref.Pin, error) { return f(ctx, r) }

var _ Resolver = Func(nil)

// Error families: errors.Is(err, ErrNotFound) and so on cover every error of that class.
var (
	// ErrNotFound: the registry says the repository or tag does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the registry could not be reached or kept failing within the retry bound.
	ErrUnavailable = errors.New("registry unavailable")
	// ErrDenied: the registry refused the credentials or the access.
	ErrDenied = errors.New("access denied")
	// ErrNotInLock: hermetic resolution found no lock entry for the reference.
	ErrNotInLock = errors.New("not in lock")
	// ErrPlatform: no manifest matches the requested platform.
	ErrPlatform = errors.New("no manifest for platform")
)
