package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// RunLocal runs the runtime on this host's local (bubblewrap) backend: the
// runtime keeps the warm pools, the cost ledger and the cleanup reconciler,
// and its sandboxes die with it.
func RunLocal(ctx context.Context, c Config, ready func(addr string)) error {
	if err := c.defaults(); err != nil {
		return err
	}
	var rtOf atomic.Pointer[runtime.Runtime]
	h, err := newLocalHost(ctx, c, &rtOf)
	if err != nil {
		return err
	}
	defer h.close()
	return run(ctx, c, h, &rtOf, ready)
}

// localHost is the local backend as the runtime's host.
type localHost struct {
	c     Config
	be    *local.Backend
	costs *cost.Ledger
}

var _ host = (*localHost)(nil)

func newLocalHost(ctx context.Context, c Config, rtOf *atomic.Pointer[runtime.Runtime]) (*localHost, error) {
	// The backend makes the state directory and its missing parents 0711:
	// traversable (not listable) by the users templates run as, whose
	// sandboxes' roots live below it. The state directory is the
	// runtime's, so it is set so even when it exists. The proxies'
	// attempts go to the runtime, made later.
	record := func(id string, a egress.Attempt) {
		if rt := rtOf.Load(); rt != nil {
			rt.RecordEgress(id, a)
		}
	}
	be, err := local.New(filepath.Join(c.State, "sandboxes"), local.WithEgressRecorder(record))
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(c.State, 0o711); err != nil {
		be.Close()
		return nil, err
	}
	// The cost ledger: intervals a killed runtime left open end as unknown.
	ledger, err := cost.OpenLedger(ctx, filepath.Join(c.State, cost.StateFile))
	if err != nil {
		be.Close()
		return nil, err
	}
	if n := ledger.Recovered(); n > 0 {
		fmt.Fprintf(c.Log, "cost ledger: %d intervals of an earlier run ended at an unknown time (the runtime was killed)\n", n)
	}
	return &localHost{c: c, be: be, costs: ledger}, nil
}

func (h *localHost) backend() sandbox.Backend { return h.be }

// open: the local ledger is a file of the host, opened with it (a local
// runtime is one host: its ledger stays in its state directory with --db
// too).
func (h *localHost) open(context.Context, string) error { return nil }
func (h *localHost) ledger() *cost.Ledger               { return h.costs }
func (h *localHost) warmLedger() *cost.Ledger           { return h.costs }
func (h *localHost) reconciles() bool                   { return true }

// serverOptions: none; elector: none, the local backend is one host.
func (h *localHost) serverOptions() []runtime.ServerOption { return nil }
func (h *localHost) elector() *leader.Elector              { return nil }

// recover reaps the sandboxes a killed runtime left dead (they die with it);
// their runs are finalised next.
func (h *localHost) recover(ctx context.Context, _ runs.Store) {
	gone, err := sandbox.Reap(ctx, h.be)
	if len(gone) > 0 || err != nil {
		fmt.Fprintf(h.c.Log, "reaped %d sandboxes of an earlier run (errors: %v)\n", len(gone), err)
	}
}

func (h *localHost) checkTemplates(ctx context.Context, d *runtime.Desired, art runtime.Artifacts) error {
	return checkTemplates(ctx, d, art, h.be, h.c.Log)
}

// background samples the workspaces' storage for the cost ledger.
// everyReplica: none, the local backend is one host.
func (h *localHost) everyReplica(context.Context, *sync.WaitGroup) {}

func (h *localHost) background(ctx context.Context, bg *sync.WaitGroup) {
	every := h.c.StorageEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	bg.Go(func() { sampleStorage(ctx, h.be, h.costs, every) })
}

// stop deletes the sandboxes (they die with the runtime anyway) and closes
// the ledger's open intervals.
func (h *localHost) stop(ctx context.Context, _ runs.Store, _ func(string) bool) {
	all, _ := h.be.List(ctx, sandbox.Filter{})
	for _, s := range all {
		_ = h.be.Delete(ctx, s.ID)
	}
	if err := h.costs.LeaveAll(ctx, time.Now()); err != nil {
		fmt.Fprintf(h.c.Log, "cost ledger: %v\n", err)
	}
}

func (h *localHost) close() {
	h.costs.Close()
	h.be.Close()
}

// sampleStorage records, every period, the bytes each sandbox's workspace
// keeps, until ctx ends.
func sampleStorage(ctx context.Context, lb *local.Backend, ledger *cost.Ledger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		at := time.Now()
		all, err := lb.List(ctx, sandbox.Filter{})
		if err == nil {
			var us []cost.Usage
			for _, s := range all {
				if s.State == sandbox.StateDead {
					continue
				}
				if n, _, err := lb.DiskUsage(ctx, s.ID); err == nil {
					us = append(us, cost.Usage{SandboxID: s.ID, Pool: s.Pool, Generation: s.Generation, Bytes: n})
				}
			}
			ledger.Sample(us, at, every)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkTemplates refuses to start when the sandboxes of a generation d
// wants warm could not be created for a reason the runtime can tell now:
// the template's user cannot reach the state directory (see
// local.Backend.CheckTemplate). A template that cannot be fetched yet is
// only logged: the warm loop retries it and logs why it fails.
func checkTemplates(ctx context.Context, d *runtime.Desired, art runtime.Artifacts, be *local.Backend, log io.Writer) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(d.Pools)) {
		for _, g := range d.Pools[name].Warm() {
			img, _, err := art.Template(ctx, g)
			if err != nil {
				fmt.Fprintf(log, "pool %s, generation %s: template not checked: %v\n", name, g.ID, err)
				continue
			}
			if err := be.CheckTemplate(img); err != nil {
				errs = append(errs, fmt.Errorf("pool %s, generation %s: %w", name, g.ID, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("runtime: no sandbox could start: %w", err)
	}
	return nil
}
