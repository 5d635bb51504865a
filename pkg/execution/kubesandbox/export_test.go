package kubesandbox

import (
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// PathProofs is how many runners b proved on a claim's path (not taken
// from ProveWarm).
func PathProofs(b *Backend) int64 { return b.pathProofs.Load() }

// WithDial makes b reach a pod's runner through dial (DialRunner wrapped:
// tests count the dials).
func WithDial(dial func(cfg *rest.Config, namespace, pod string) runner.DialFunc) Option {
	return func(o *options) error {
		o.dial = dial
		return nil
	}
}
