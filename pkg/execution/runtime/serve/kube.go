package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/kubeconfig"
	"k8s.io/client-go/rest"
)

// RunKubernetes runs the runtime on agent-sandbox in a cluster
// (Config.Kubeconfig, Config.Namespace): the cluster keeps the warm pools
// render made, a claim is a SandboxClaim, and sandboxes outlive the
// runtime.
func RunKubernetes(ctx context.Context, c Config, ready func(addr string)) error {
	if err := c.defaults(); err != nil {
		return err
	}
	// The egress attempts of allow-list pods go to the runtime, made later.
	var rtOf atomic.Pointer[runtime.Runtime]
	record := func(id string, a egress.Attempt) {
		if rt := rtOf.Load(); rt != nil {
			rt.RecordEgress(id, a)
		}
	}
	be, err := kubeBackend(c, kubesandbox.WithEgressRecorder(record))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.State, 0o700); err != nil {
		return err
	}
	return run(ctx, c, &kubeHost{c: c, be: be}, &rtOf, ready)
}

// kubeHost is a cluster as the runtime's host.
type kubeHost struct {
	c  Config
	be sandbox.Backend
}

var _ host = (*kubeHost)(nil)

func (h *kubeHost) backend() sandbox.Backend { return h.be }

// ledger: none yet on a cluster (its warm pools are the cluster's).
func (h *kubeHost) ledger() *cost.Ledger { return nil }

// reconciles: the cleanup reconciler runs on the local backend only.
func (h *kubeHost) reconciles() bool { return false }

func (h *kubeHost) checkTemplates(context.Context, *runtime.Desired, runtime.Artifacts) error {
	return nil // the cluster pulls and runs templates
}

func (h *kubeHost) background(context.Context, *sync.WaitGroup) {}

// recover releases the claims of the runs an earlier runtime left open: the
// claims outlived it, found by their names (no grant of them survived).
func (h *kubeHost) recover(ctx context.Context, store runs.Store) {
	n, err := releaseClaims(ctx, store, h.be)
	if n > 0 || err != nil {
		fmt.Fprintf(h.c.Log, "released %d claims of an earlier run (errors: %v)\n", n, err)
	}
}

// stop releases the runtime's own claims only: others may share the
// namespace.
func (h *kubeHost) stop(ctx context.Context, store runs.Store) {
	_, _ = releaseClaims(ctx, store, h.be)
}

func (h *kubeHost) close() {}

// kubeBackend is the Kubernetes backend of c.
func kubeBackend(c Config, opts ...kubesandbox.Option) (sandbox.Backend, error) {
	load := func() (*rest.Config, string, error) { return kubeconfig.Load(c.Kubeconfig) }
	if c.Kubeconfig == "" {
		load = kubeconfig.InCluster // in a pod: its service account
	}
	cfg, ns, err := load()
	if err != nil {
		return nil, err
	}
	if c.Namespace != "" {
		ns = c.Namespace
	}
	return kubesandbox.New(cfg, ns, opts...)
}

// releaseClaims deletes the sandboxes whose owner is an open run of store
// (on a cluster: the claims named for those runs) and returns how many.
func releaseClaims(ctx context.Context, store runs.Store, be sandbox.Backend) (int, error) {
	open, err := store.Open(ctx)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	all, err := be.List(ctx, sandbox.Filter{})
	if err != nil {
		return 0, err
	}
	mine := map[string]bool{}
	for _, id := range open {
		mine[id] = true
	}
	n := 0
	var errs []error
	for _, s := range all {
		if !mine[s.Owner] {
			continue
		}
		if err := be.Delete(ctx, s.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
