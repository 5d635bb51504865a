package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
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
	if err := os.MkdirAll(c.State, 0o700); err != nil {
		return err
	}
	// Every claim this runtime deletes (a release, the reconciler) is
	// recorded as it goes, however short it lived; the sampler covers the
	// rest (warm idle, retained, other replicas' claims). The ledger is
	// opened once the database answers (open).
	rel := newReleases(nil)
	cfg, ns, err := kubeConfig(c)
	if err != nil {
		return err
	}
	be, err := kubesandbox.New(cfg, ns, kubesandbox.WithEgressRecorder(record), kubesandbox.WithReleaseObserver(rel.observe))
	if err != nil {
		return err
	}
	h := &kubeHost{c: c, be: be, rel: rel}
	defer h.close()
	perms := be.Permissions()
	if c.LeaderElect {
		lns := c.LeaderNamespace
		if lns == "" {
			lns = ns
			if own, err := kubeconfig.PodNamespace(); err == nil && c.Kubeconfig == "" {
				lns = own // in a pod: the Lease lives beside the runtime
			}
		}
		name := c.LeaderLease
		if name == "" {
			name = DefaultLeaderLease
		}
		if h.el, err = leader.New(cfg, leader.Config{Namespace: lns, Name: name, LeaseDuration: c.LeaseDuration, Log: c.Log}); err != nil {
			return err
		}
		perms = append(perms, leader.Permissions(lns)...)
	}
	// Every verb it uses, asked at start: a missing one is named in the log
	// and keeps /readyz failing until the Role grants it.
	h.access = newAccessCheck(cfg, perms, c.Log)
	h.access.check(ctx)
	return run(ctx, c, h, &rtOf, ready)
}

// kubeHost is a cluster as the runtime's host.
type kubeHost struct {
	c      Config
	be     *kubesandbox.Backend
	costs  *cost.Ledger
	rel    *releases
	access *accessCheck
	el     *leader.Elector // nil without Config.LeaderElect
}

var _ host = (*kubeHost)(nil)

func (h *kubeHost) backend() sandbox.Backend { return h.be }

// open opens the cost ledger, kept from the cluster's own timestamps:
// intervals a stopped runtime left open end as unknown, and are reopened
// when the cluster says they never ended (cost.Ledger.Observe). With
// Config.DB (or DBFile) it is in that PostgreSQL database, shared by the replicas:
// the Lease's holder samples the cluster into it, each replica records
// the claims it deletes, and a replica ends at start (and while it runs)
// only the open intervals of replicas that stopped marking themselves
// alive, never a live one's (cost.OpenLedgerPostgres). Without it, a file
// in the state directory.
func (h *kubeHost) open(ctx context.Context, db string) error {
	var err error
	if db != "" {
		h.costs, err = cost.OpenLedgerPostgres(ctx, db)
	} else {
		h.costs, err = cost.OpenLedger(ctx, filepath.Join(h.c.State, cost.StateFile))
	}
	if err != nil {
		return err
	}
	if n := h.costs.Recovered(); n > 0 {
		fmt.Fprintf(h.c.Log, "cost ledger: %d intervals of a stopped runtime ended at an unknown time\n", n)
	}
	h.rel.ledger = h.costs // before any claim is served or deleted
	return nil
}

// ledger is kept from the cluster's objects (background), not by the
// runtime's warm pools: the cluster keeps those.
func (h *kubeHost) ledger() *cost.Ledger     { return h.costs }
func (h *kubeHost) warmLedger() *cost.Ledger { return nil }

// reconciles: the cleanup reconciler sweeps the namespace's objects.
func (h *kubeHost) reconciles() bool { return true }

// serverOptions: /readyz fails while a verb the backend uses is not granted.
func (h *kubeHost) serverOptions() []runtime.ServerOption {
	opts := []runtime.ServerOption{runtime.WithReadyCheck(h.access.readyCheck())}
	if h.el != nil { // the cluster's pool counts: from the Lease's holder only
		opts = append(opts, runtime.WithPoolSamplesWhen(h.el.Leading))
	}
	return opts
}

func (h *kubeHost) elector() *leader.Elector { return h.el }

func (h *kubeHost) checkTemplates(context.Context, *runtime.Desired, runtime.Artifacts) error {
	return nil // the cluster pulls and runs templates
}

// background reads the cluster's objects for the cost ledger every
// StorageEvery.
func (h *kubeHost) background(ctx context.Context, bg *sync.WaitGroup) {
	every := h.c.StorageEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	bg.Go(func() { observeCosts(ctx, h.be, h.costs, h.rel, every, h.c.Log) })
}

// everyReplica proves the warm members' runners when they are Ready: each
// replica claims from its own proofs (with --leader-elect too), and keeps
// the connections they were asked over for its claims' heartbeats.
func (h *kubeHost) everyReplica(ctx context.Context, bg *sync.WaitGroup) {
	bg.Go(func() { h.be.ProveWarm(ctx) })
}

// recover releases the claims of the runs an earlier runtime left open: the
// claims outlived it, found by their names (no grant of them survived).
func (h *kubeHost) recover(ctx context.Context, store runs.Store) {
	n, err := releaseClaims(ctx, store, h.be, func(string) bool { return true })
	if n > 0 || err != nil {
		fmt.Fprintf(h.c.Log, "released %d claims of an earlier run (errors: %v)\n", n, err)
	}
}

// stop releases the runtime's own claims only: others may share the
// namespace.
func (h *kubeHost) stop(ctx context.Context, store runs.Store, mine func(runID string) bool) {
	_, _ = releaseClaims(ctx, store, h.be, mine)
}

func (h *kubeHost) close() {
	if h.costs != nil {
		h.costs.Close()
	}
}

// kubeConfig is the cluster of c and the namespace of its claims.
func kubeConfig(c Config) (*rest.Config, string, error) {
	load := func() (*rest.Config, string, error) { return kubeconfig.Load(c.Kubeconfig) }
	if c.Kubeconfig == "" {
		load = kubeconfig.InCluster // in a pod: its service account
	}
	cfg, ns, err := load()
	if err != nil {
		return nil, "", err
	}
	if c.Namespace != "" {
		ns = c.Namespace
	}
	return cfg, ns, nil
}

// releaseClaims deletes the sandboxes whose owner is an open run of store
// (on a cluster: the claims named for those runs) and returns how many.
func releaseClaims(ctx context.Context, store runs.Store, be sandbox.Backend, mine func(runID string) bool) (int, error) {
	open, err := store.Open(ctx)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	all, err := be.List(ctx, sandbox.Filter{})
	if err != nil {
		return 0, err
	}
	owned := map[string]bool{}
	for _, id := range open {
		owned[id] = mine(id)
	}
	n := 0
	var errs []error
	for _, s := range all {
		if !owned[s.Owner] {
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

// releases records in the ledger the claims this runtime deleted
// (kubesandbox.WithReleaseObserver), and keeps them from the sampler: a
// read of the cluster that began before a release may still list it.
type releases struct {
	ledger *cost.Ledger
	mu     sync.Mutex
	gone   map[releaseKey]time.Time // the entry released -> when it was gone
}

// releaseKey is an interval as the ledger tells them apart (cost.Ledger.Observe).
type releaseKey struct {
	sandbox string
	state   cost.State
	start   int64
}

func keyOf(e cost.Entry) releaseKey { return releaseKey{e.SandboxID, e.State, e.At.UnixNano()} }

func newReleases(l *cost.Ledger) *releases {
	return &releases{ledger: l, gone: map[releaseKey]time.Time{}}
}

// observe records r's Sandbox in the state its claim held it in, from the
// cluster's creation times (occupancy, as the sampler reads them: the
// same start, so an interval the sampler opened is reopened, not counted
// again; cost.Ledger.Observe), ended when it was gone.
func (rs *releases) observe(r kubesandbox.Release) {
	e, ok := occupancy([]sandbox.Object{r.Claim, r.Sandbox})[r.Sandbox.Name]
	if !ok {
		return
	}
	rs.mu.Lock()
	rs.gone[keyOf(e)] = r.Gone
	rs.mu.Unlock()
	rs.ledger.Observe(e)
	rs.ledger.Leave(e.SandboxID, r.Gone)
}

// released says whether e was released already (nil releases: none is).
func (rs *releases) released(e cost.Entry) bool {
	if rs == nil {
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, ok := rs.gone[keyOf(e)]
	return ok
}

// forget drops the releases gone before a read of the cluster begun at
// read: that read and every later one no longer lists them.
func (rs *releases) forget(read time.Time) {
	if rs == nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k, at := range rs.gone {
		if at.Before(read) {
			delete(rs.gone, k)
		}
	}
}

// observeCosts records, every period until ctx ends, the state of each
// Sandbox of the cluster in ledger, from the cluster's own timestamps
// (occupancy); a Sandbox gone leaves at its deletionTimestamp when one was
// seen, else when it was found gone. A Sandbox whose claim rel recorded as
// released is left to it.
func observeCosts(ctx context.Context, ob sandbox.Objects, ledger *cost.Ledger, rel *releases, every time.Duration, log io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	seen := map[string]cost.Entry{}
	deleting := map[string]time.Time{}
	for {
		read := time.Now()
		objs, err := ob.Objects(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			fmt.Fprintf(log, "cost ledger: %v\n", err)
		case err == nil:
			now := time.Now()
			cur := occupancy(objs)
			for id, e := range cur {
				if rel.released(e) {
					delete(cur, id) // recorded, ended, by its release
					delete(seen, id)
				}
			}
			rel.forget(read)
			for id, e := range cur {
				if p, ok := seen[id]; !ok || p.State != e.State || !p.At.Equal(e.At) {
					ledger.Observe(e)
				}
			}
			for _, o := range objs {
				if o.Kind == sandbox.KindSandbox && !o.Deleting.IsZero() {
					deleting[o.Name] = o.Deleting
				}
			}
			for id := range seen {
				if _, ok := cur[id]; !ok {
					at := now
					if d, ok := deleting[id]; ok {
						at = d
					}
					ledger.Leave(id, at)
					delete(deleting, id)
				}
			}
			seen = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// occupancy is the state of each Sandbox of objs, by name, since when the
// cluster says: active (or proof) from its claim's creation, when a claim
// is bound to it; retained, a Sandbox scaled to zero, from its Ready
// condition's last transition; warm idle, a warm pool's member, from its
// own creation. A Sandbox none of these covers is left out.
func occupancy(objs []sandbox.Object) map[string]cost.Entry {
	claims := map[string]sandbox.Object{}
	for _, o := range objs {
		if o.Kind == sandbox.KindClaim && o.Bound != "" {
			claims[o.Bound] = o
		}
	}
	out := map[string]cost.Entry{}
	for _, o := range objs {
		if o.Kind != sandbox.KindSandbox {
			continue
		}
		e := cost.Entry{SandboxID: o.Name, Pool: o.Pool, Generation: o.Generation}
		c, claimed := claims[o.Name]
		switch {
		case o.Suspended:
			e.State, e.At = cost.Retained, o.Transition
			if e.At.IsZero() {
				e.At = o.Created
			}
		case claimed && c.Proof:
			e.State, e.At = cost.Proof, later(c.Created, o.Created)
		case claimed:
			e.State, e.At, e.RunID = cost.Active, later(c.Created, o.Created), c.Owner
		case strings.HasPrefix(o.Controller, sandbox.KindWarmPool+"/"):
			e.State, e.At = cost.WarmIdle, o.Created
		default:
			continue
		}
		out[o.Name] = e
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
