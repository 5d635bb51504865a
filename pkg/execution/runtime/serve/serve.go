package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/kubesandbox"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// Backends serve runs sandboxes on.
const (
	// BackendLocal: bubblewrap on this host; the runtime keeps the warm
	// pools, and sandboxes die with it.
	BackendLocal = "local"
	// BackendKubernetes: agent-sandbox on a cluster (Config.Kubeconfig);
	// the cluster keeps the warm pools render made, a claim is a
	// SandboxClaim, and sandboxes outlive the runtime.
	BackendKubernetes = "kubernetes"
)

// Config is what `slipway runtime serve` runs with.
type Config struct {
	// Repo is the config repository; Branch its branch (default main).
	Repo, Branch string
	// State is the state directory: sandboxes, run manifests, caches.
	State string
	// Listen is the API's address; Token its bearer token.
	Listen, Token string
	// MaxStaleness bounds how old the view of the config repository may be
	// for claims to be granted (default 30s); SyncInterval is the poll
	// period (default 2s).
	MaxStaleness, SyncInterval time.Duration
	Verify                     runtime.Verify
	// Log receives one line per event worth knowing (default: discard).
	Log io.Writer
	// Backend is BackendLocal (the default) or BackendKubernetes, on the
	// cluster of Kubeconfig, in Namespace (default: the kubeconfig
	// context's).
	Backend, Kubeconfig, Namespace string
	// Environment labels every metric (environment=...); none when "".
	Environment string
	// CredentialTTL is the lifetime of the claims' credentials (default
	// runtime.DefaultCredentialTTL); an open claim's is renewed at
	// runtime.RenewAt of it unless NoCredentialRenewal.
	CredentialTTL       time.Duration
	NoCredentialRenewal bool
	// ReconcileInterval is how often the cleanup reconciler makes a pass
	// (local backend; the CLI's default is reconcile.DefaultInterval); 0
	// disables it.
	ReconcileInterval time.Duration
	// Failpoint is a test's fault for the reconciler
	// (reconcile.FailpointDeleteHang); "" for none.
	Failpoint string
	// StorageEvery is how often the local backend's workspaces are sampled
	// for the cost ledger (default 30s).
	StorageEvery time.Duration
}

// Run runs the runtime until ctx ends: it follows the config repository,
// keeps the warm pools, and serves the API. Ready is called with the
// address it listens on.
func Run(ctx context.Context, c Config, ready func(addr string)) error {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.MaxStaleness <= 0 {
		c.MaxStaleness = 30 * time.Second
	}
	state, err := filepath.Abs(c.State)
	if err != nil {
		return err
	}
	c.State = state
	var (
		be   sandbox.Backend
		lb   *local.Backend
		rtOf atomic.Pointer[runtime.Runtime]
	)
	switch c.Backend {
	case "", BackendLocal:
		// The backend makes the state directory and its missing parents
		// 0711: traversable (not listable) by the users templates run as,
		// whose sandboxes' roots live below it. The state directory is the
		// runtime's, so it is set so even when it exists.
		// The proxies' attempts go to the runtime, made below.
		record := func(id string, a egress.Attempt) {
			if rt := rtOf.Load(); rt != nil {
				rt.RecordEgress(id, a)
			}
		}
		if lb, err = local.New(filepath.Join(c.State, "sandboxes"), local.WithEgressRecorder(record)); err != nil {
			return err
		}
		defer lb.Close()
		if err := os.Chmod(c.State, 0o711); err != nil {
			return err
		}
		be = lb
	case BackendKubernetes:
		if be, err = kubeBackend(c); err != nil {
			return err
		}
		if err := os.MkdirAll(c.State, 0o700); err != nil {
			return err
		}
	default:
		return fmt.Errorf("runtime: backend %q: want %s or %s", c.Backend, BackendLocal, BackendKubernetes)
	}
	repo, err := gitops.Open(ctx, c.Repo, gitops.WithCacheDir(filepath.Join(c.State, "config-cache")))
	if err != nil {
		return err
	}
	// A runtime that was killed left its local sandboxes dead (they die
	// with it) and their runs open: reap the one, then finalise the other.
	if lb != nil {
		gone, err := sandbox.Reap(ctx, be)
		if len(gone) > 0 || err != nil {
			fmt.Fprintf(c.Log, "reaped %d sandboxes of an earlier run (errors: %v)\n", len(gone), err)
		}
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(c.State, runs.StateFile))
	if err != nil {
		return err
	}
	defer store.Close()
	// On a cluster its claims outlived it: the claims of its open runs are
	// found by their names and released (no grant of them survived).
	if lb == nil {
		n, err := releaseClaims(ctx, store, be)
		if n > 0 || err != nil {
			fmt.Fprintf(c.Log, "released %d claims of an earlier run (errors: %v)\n", n, err)
		}
	}
	reaped := time.Now()
	if n, err := finishOrphans(ctx, store, be, reaped); n > 0 || err != nil {
		fmt.Fprintf(c.Log, "finalised %d open runs of an earlier run as failed: their sandboxes are gone (errors: %v)\n", n, err)
	}
	// The cost ledger (local backend only: the cluster keeps its own warm
	// pools). Intervals a killed runtime left open end as unknown.
	var ledger *cost.Ledger
	if lb != nil {
		if ledger, err = cost.OpenLedger(ctx, filepath.Join(c.State, cost.StateFile)); err != nil {
			return err
		}
		defer ledger.Close()
		if n := ledger.Recovered(); n > 0 {
			fmt.Fprintf(c.Log, "cost ledger: %d intervals of an earlier run ended at an unknown time (the runtime was killed)\n", n)
		}
	}
	if c.Verify.Packages == nil {
		c.Verify.Packages = store // templates' packages, from their SBOM attestations
	}
	syncer := runtime.NewSyncer(repo, c.Branch, c.Verify, c.SyncInterval, runtime.WithSyncLog(c.Log))
	art := runtime.NewRegistryArtifacts(filepath.Join(c.State, "artifacts"))
	if d, err := syncer.Sync(ctx); err == nil { // a failure is logged by the syncer
		fmt.Fprintf(c.Log, "synced %s\n", d.Summary())
		if lb != nil {
			if err := checkTemplates(ctx, d, art, lb, c.Log); err != nil {
				return err
			}
		}
	}
	wopts := []runtime.WarmOption{runtime.WithWarmLog(c.Log)}
	if ledger != nil {
		wopts = append(wopts, runtime.WithLedger(ledger))
	}
	warm := runtime.NewWarm(be, art, wopts...)
	if c.CredentialTTL <= 0 {
		c.CredentialTTL = runtime.DefaultCredentialTTL
	}
	broker, err := runtime.NewBroker(runtime.LocalIssuer, c.CredentialTTL)
	if err != nil {
		return err
	}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { d, at, _ := syncer.Current(); return d, at }, warm, store, c.MaxStaleness,
		runtime.WithLog(c.Log), runtime.WithBroker(broker), runtime.WithCredentialRenewal(!c.NoCredentialRenewal))
	rtOf.Store(rt)
	defer rt.Close() // stops the heartbeat monitors
	var mopts []telemetry.Option
	if c.Environment != "" {
		mopts = append(mopts, telemetry.WithEnvironment(c.Environment))
	}
	metrics, err := telemetry.NewMetrics(mopts...)
	if err != nil {
		return err
	}
	if ledger != nil {
		if err := metrics.ObserveStateSeconds(func() []telemetry.StateSample {
			var out []telemetry.StateSample
			for _, t := range ledger.Totals() {
				out = append(out, telemetry.StateSample{Pool: t.Pool, State: string(t.State), Seconds: t.Seconds})
			}
			return out
		}); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	var rec *reconcile.Reconciler
	sopts := []runtime.ServerOption{runtime.WithMetrics(metrics)}
	if lb != nil && c.ReconcileInterval > 0 {
		records, err := reconcile.OpenRecords(ctx, filepath.Join(c.State, reconcile.RecordsFile))
		if err != nil {
			ln.Close()
			return err
		}
		defer records.Close()
		host, _ := os.Hostname()
		rec, err = reconcile.New(reconcile.Config{
			Backend: be, Runs: store, Records: records, Owner: host + "/" + ln.Addr().String(),
			Warm: func() (map[string]map[string]bool, bool) { return warmGenerations(syncer) },
			Held: rt.Holds, Credentials: brokerCredentials{rt.Broker()}, Metrics: metrics,
			Logger: slog.New(slog.NewJSONHandler(c.Log, nil)), Failpoint: c.Failpoint,
			Deleted: func(id string) {
				if ledger != nil {
					ledger.Leave(id, time.Time{}) // its interval ends with it
				}
			},
		})
		if err != nil {
			ln.Close()
			return err
		}
		sopts = append(sopts, runtime.WithCleanup(func(ctx context.Context) (any, error) { return reconcile.View(ctx, records, 20) }))
	}
	srv, err := runtime.NewServer(rt, syncer, be, c.Token, sopts...)
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	// Everything that may create a sandbox or write a manifest (the
	// syncer, the warm loop, the API's handlers) has ended before the
	// sandboxes are deleted and the store closed.
	var bg sync.WaitGroup
	defer func() { cancel(); bg.Wait() }()
	bg.Go(func() { syncer.Run(ctx) })
	bg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			if d, _, _ := syncer.Current(); d != nil {
				if rep := warm.Reconcile(ctx, d); len(rep.Created)+len(rep.Deleted)+len(rep.Errors) > 0 {
					fmt.Fprintf(c.Log, "warm pools: %d created, %d deleted, errors %v\n", len(rep.Created), len(rep.Deleted), rep.Errors)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	if rec != nil {
		bg.Go(func() { rec.Run(ctx, c.ReconcileInterval) })
	}
	if ledger != nil {
		every := c.StorageEvery
		if every <= 0 {
			every = 30 * time.Second
		}
		bg.Go(func() { sampleStorage(ctx, lb, ledger, every) })
	}
	// Serve returns as soon as Shutdown begins; shut waits for the
	// handlers still running.
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		<-ctx.Done()
		sctx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer c2()
		_ = hs.Shutdown(sctx)
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	cancel()
	<-shut
	bg.Wait()
	// Stop: the sandboxes go with the runtime (they die with it anyway),
	// and so do the claims on them; no heartbeat moves a claim meanwhile.
	_ = rt.Close()
	stop := context.Background()
	if lb != nil {
		all, _ := be.List(stop, sandbox.Filter{})
		for _, s := range all {
			_ = be.Delete(stop, s.ID)
		}
		if err := ledger.LeaveAll(stop, time.Now()); err != nil {
			fmt.Fprintf(c.Log, "cost ledger: %v\n", err)
		}
	} else {
		_, _ = releaseClaims(stop, store, be) // its own claims only: others may share the namespace
	}
	if n, err := finishOrphans(stop, store, be, time.Now()); n > 0 || err != nil {
		fmt.Fprintf(c.Log, "finalised %d open runs as failed: the runtime stopped (errors: %v)\n", n, err)
	}
	return nil
}

// warmGenerations is the generations each pool keeps warm in the
// syncer's current desired state; false before the first sync.
func warmGenerations(syncer *runtime.Syncer) (map[string]map[string]bool, bool) {
	d, _, _ := syncer.Current()
	if d == nil {
		return nil, false
	}
	out := map[string]map[string]bool{}
	for name, p := range d.Pools {
		out[name] = map[string]bool{}
		for _, g := range p.Warm() {
			out[name][g.ID] = true
		}
	}
	return out, true
}

// brokerCredentials is the runtime's broker as the reconciler sees it.
type brokerCredentials struct{ b *runtime.Broker }

func (c brokerCredentials) Live() []reconcile.Credential {
	live := c.b.Live()
	out := make([]reconcile.Credential, len(live))
	for i, l := range live {
		out[i] = reconcile.Credential{Fingerprint: l.Fingerprint, RunID: l.RunID, ExpiresAt: l.ExpiresAt}
	}
	return out
}

func (c brokerCredentials) Revoke(fp string) { c.b.Revoke(fp) }

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

// kubeBackend is the Kubernetes backend of c.
func kubeBackend(c Config) (sandbox.Backend, error) {
	if c.Kubeconfig == "" {
		return nil, errors.New("runtime: the kubernetes backend needs a kubeconfig")
	}
	cfg, ns, err := kubeapply.LoadKubeconfig(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if c.Namespace != "" {
		ns = c.Namespace
	}
	return kubesandbox.New(cfg, ns)
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

// errSandboxExists keeps a run open in finishOrphans.
var errSandboxExists = errors.New("its sandbox still exists")

// finishOrphans finalises the open runs (granted or running) whose sandbox
// be no longer has: no claim can end them any more. Each is marked failed,
// with its resources released at released (unless it recorded that time
// already); everything else it recorded stays. A run whose sandbox still
// exists, running or dead, is left open. It returns how many it finalised.
func finishOrphans(ctx context.Context, store runs.Store, be sandbox.Backend, released time.Time) (int, error) {
	open, err := store.Open(ctx)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	all, err := be.List(ctx, sandbox.Filter{})
	if err != nil {
		return 0, err
	}
	exists := make(map[string]bool, len(all))
	for _, s := range all {
		exists[s.ID] = true
	}
	n := 0
	var errs []error
	for _, id := range open {
		err := store.Update(ctx, id, func(m *runmanifest.Manifest) error {
			if exists[m.SandboxID] {
				return errSandboxExists
			}
			m.Status = runmanifest.StatusFailed
			if m.Lifecycle.ResourcesReleased.IsZero() {
				m.Lifecycle.ResourcesReleased = released
			}
			return nil
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, errSandboxExists), errors.Is(err, runs.ErrCompleted):
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
