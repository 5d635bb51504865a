package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/internal/secretfile"
	"github.com/slipway-dev/slipway/internal/startup"
	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/cost"
	"github.com/slipway-dev/slipway/pkg/execution/leader"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
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
	// DB is where run manifests are kept: "" for SQLite in State (the
	// embedded default), or a postgres://… DSN for a database several
	// runtimes share, with the cleanup records and, on Kubernetes, the
	// cost ledger.
	DB string
	// DBFile, instead of DB, is a file holding the postgres:// DSN (a
	// mounted Secret): read until it exists, and again on each try to
	// reach the database, so a Secret created or fixed after the start is
	// found without a restart.
	DBFile string
	// Listen is the API's address; Token its bearer token, or TokenFile a
	// file holding it, read until it exists (a mounted Secret).
	Listen, Token, TokenFile string
	// Mounts names the Secret each file (DBFile, TokenFile) is mounted
	// from, for the log line a missing one makes.
	Mounts secretfile.Mounts
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
	// (the CLI's default is reconcile.DefaultInterval); 0 disables it. On
	// Kubernetes it sweeps the namespace's objects, the cluster being the
	// authority on what exists.
	ReconcileInterval time.Duration
	// Failpoint is a test's fault for the reconciler
	// (reconcile.FailpointDeleteHang); "" for none.
	Failpoint string
	// StorageEvery is how often the local backend's workspaces are sampled
	// for the cost ledger, and how often the Kubernetes backend's objects
	// are read for it (default 30s).
	StorageEvery time.Duration
	// CheckpointSweepEvery is how often the checkpoints whose pool's
	// restore window has closed are deleted (default
	// DefaultCheckpointSweep; with CheckpointSigner only).
	CheckpointSweepEvery time.Duration
	// CheckpointSigner signs the runs' checkpoints (kept in an OCI layout
	// at CheckpointDir under State) and verifies them before a restore;
	// nil: the runtime takes no checkpoints.
	CheckpointSigner signature.SignerVerifier
	// CheckpointRepository, with CheckpointSigner, is the registry
	// repository each checkpoint is also pushed to by digest, signed and
	// attested; a resume whose checkpoint the state lacks pulls it from
	// there, verified first ("": checkpoints stay in the state).
	CheckpointRepository string
	// LogFormat is LogJSON or LogText ("" is text): the format of Log's
	// lines. The lines about a run carry its ids either way.
	LogFormat string
	// OTLP sends the runtime's spans over OTLP/HTTP too (the exporter
	// reads the standard OTEL_EXPORTER_OTLP_* environment); they are kept
	// in a ring for GET /v1/traces/{id} either way.
	OTLP bool
	// DrainTimeout is how long a runtime told to stop (ctx ended) drains
	// before it stops: it takes no new claims at once (503 with
	// Retry-After; /readyz fails, so its endpoint leaves a Service), gives
	// its Lease up, and answers the requests under way (a command running
	// runs to its end) within DrainTimeout (at least 5 s); then what is
	// still open ends as before. Replicas that share a run store (DB with
	// LeaderElect) also keep serving the claims they hold (the next
	// commands, releases, heartbeats: the others pass them on) until each
	// is released or DrainTimeout has passed; a runtime alone on its store
	// does not wait for its claims, whose sandboxes go with it. Set it to
	// the pod's grace period less a margin.
	DrainTimeout time.Duration
	// Advertise is the address (host:port) other replicas reach this one's
	// API at, recorded in the run manifests of the claims it grants
	// (served_by.runtime.address) when replicas share a run store (DB with
	// LeaderElect): a replica asked about a claim it does not hold passes
	// the request on to the one that does, with the same authentication.
	// "": none recorded, nothing passed on.
	Advertise string
	// LeaderElect (Kubernetes backend only) runs the periodic work (the
	// reconciler's sweep, the cost ledger's sampling) on the one replica
	// holding the Lease LeaderLease (default DefaultLeaderLease) in
	// LeaderNamespace (default: in a pod, its own namespace; else
	// Namespace's), held for LeaseDuration (default
	// leader.DefaultLeaseDuration) without renewal. Every replica serves
	// claims either way.
	LeaderElect                  bool
	LeaderNamespace, LeaderLease string
	LeaseDuration                time.Duration
	// Incidents, when set, serves GET /v1/incidents: the incidents the
	// runtime's run store and its cleanup reconciler's records show
	// (records nil when it runs no reconciler), a value that encodes as
	// runtimeapi.Incidents. The program composes it (the CLI, with
	// pkg/control/incidents), as it does the control plane's.
	Incidents func(ctx context.Context, store runs.Store, records *reconcile.Records) (*incidentreport.Report, error)

	logger *slog.Logger // set by defaults, from Log and LogFormat
	rawLog io.Writer    // Log before defaults wrapped it
}

// CheckpointDir is where, under the state directory, the runtime keeps
// its runs' checkpoints (an OCI image layout).
const CheckpointDir = "checkpoints"

// host is what one backend brings to the runtime: the sandboxes, what a
// restart finds of an earlier run, the cost ledger and the reconciler where
// the backend has them, and what stopping leaves behind. Run composes the
// rest (the config repository, the run store, the warm loop, the API) the
// same way for every backend.
type host interface {
	// backend is where sandboxes are made.
	backend() sandbox.Backend
	// open opens what the backend keeps in the database, once the run
	// store's database answers (the cost ledger, in db on Kubernetes: the
	// DSN of Config.DB or Config.DBFile, "" for none).
	open(ctx context.Context, db string) error
	// recover deals with what an earlier run of the runtime left, before
	// its open runs are finalised.
	recover(ctx context.Context, store runs.Store)
	// ledger is the cost ledger, or nil where the backend keeps none.
	ledger() *cost.Ledger
	// warmLedger is the ledger the runtime's warm pools and reconciler
	// record into (nil: none, or the backend records it from elsewhere:
	// a cluster's own timestamps).
	warmLedger() *cost.Ledger
	// checkTemplates refuses a start no sandbox of d could survive.
	checkTemplates(ctx context.Context, d *runtime.Desired, art runtime.Artifacts) error
	// reconciles says whether the cleanup reconciler runs on this backend.
	reconciles() bool
	// background starts the backend's own periodic work on bg.
	background(ctx context.Context, bg *sync.WaitGroup)
	// everyReplica starts on bg the backend's work each replica does for
	// itself, Lease or not.
	everyReplica(ctx context.Context, bg *sync.WaitGroup)
	// serverOptions are the backend's additions to the API (readiness
	// checks).
	serverOptions() []runtime.ServerOption
	// elector, when not nil, holds the Lease under which the periodic work
	// (the reconciler, background) runs.
	elector() *leader.Elector
	// stop ends what the runtime owns when it stops: the open runs of
	// store that mine says are its own.
	stop(ctx context.Context, store runs.Store, mine func(runID string) bool)
	// close releases the backend's resources, last.
	close()
}

// Run runs the runtime until ctx ends: it follows the config repository,
// keeps the warm pools, and serves the API. Ready is called with the
// address it listens on. Config.Backend picks the composition: RunLocal or
// RunKubernetes.
func Run(ctx context.Context, c Config, ready func(addr string)) error {
	switch c.Backend {
	case "", BackendLocal:
		return RunLocal(ctx, c, ready)
	case BackendKubernetes:
		return RunKubernetes(ctx, c, ready)
	}
	return fmt.Errorf("runtime: backend %q: want %s or %s", c.Backend, BackendLocal, BackendKubernetes)
}

// DefaultLeaderLease names the Lease of Config.LeaderElect.
const DefaultLeaderLease = "slipway-runtime"

// defaults fills c's unset fields and makes its state directory absolute.
func (c *Config) defaults() error {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.logger == nil {
		raw := c.Log
		l, lines, err := logger(raw, c.LogFormat)
		if err != nil {
			return err
		}
		c.logger, c.Log, c.rawLog = l, lines, raw
	}
	if c.MaxStaleness <= 0 {
		c.MaxStaleness = 30 * time.Second
	}
	if c.CredentialTTL <= 0 {
		c.CredentialTTL = runtime.DefaultCredentialTTL
	}
	state, err := filepath.Abs(c.State)
	if err != nil {
		return err
	}
	c.State = state
	return nil
}

// parts are what run builds before it serves.
type parts struct {
	syncer  *runtime.Syncer
	warm    *runtime.Warm
	rt      *runtime.Runtime
	metrics *telemetry.Metrics
	tracing *telemetry.Tracing
}

// run is the runtime on h: the composition every backend shares.
func run(ctx context.Context, c Config, h host, rtOf *atomic.Pointer[runtime.Runtime], ready func(addr string)) error {
	repo, err := gitops.Open(ctx, c.Repo, gitops.WithCacheDir(filepath.Join(c.State, "config-cache")))
	if err != nil {
		return err
	}
	// It listens first: while it waits for its database, /healthz says it
	// lives and /readyz what it waits for (startup.Gate), instead of a
	// crash loop.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	gate := startup.NewGate("runtime", c.logger)
	hs := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer hs.Close() // on an early way out; serveUntil shuts it down gracefully
	if c, err = secretFiles(ctx, c, gate); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting
		}
		return err
	}
	store, err := startup.Wait(ctx, gate, "database", "does not answer", startup.DefaultBackoff, func(ctx context.Context) (runs.Store, error) {
		if c.DBFile != "" { // again: a DSN fixed in its Secret is taken at the next try
			dsn, err := readDSN(c)
			if err != nil && !errors.Is(err, secretfile.ErrMissing) && !errors.Is(err, runs.ErrInvalid) {
				return nil, startup.Permanent(err) // a file that cannot be read
			}
			if err != nil {
				return nil, err
			}
			c.DB = dsn
		}
		st, err := openRuns(ctx, c)
		if err != nil && (c.DB == "" || (errors.Is(err, runs.ErrInvalid) && c.DBFile == "")) {
			return nil, startup.Permanent(err) // a local file, or a name no retry fixes (but a fix of its file)
		}
		return st, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting
		}
		return err
	}
	defer store.Close()
	if err := h.open(ctx, c.DB); err != nil {
		return err
	}
	// Replicas that share one run store (--db with --leader-elect) cannot
	// tell the open runs of a replica that died from those of one that
	// serves: a replica never ends the runs it does not hold, at start or
	// at stop (a control plane claiming again with the run's request key
	// adopts one; the reconciler sweeps the claims of final runs).
	shared := c.DB != "" && c.LeaderElect
	if shared {
		fmt.Fprintf(c.Log, "sharing the run store with other replicas: their open runs are theirs\n")
	} else {
		h.recover(ctx, store)
	}
	p, err := build(ctx, c, h, repo, store)
	if err != nil {
		return err
	}
	// The runs an earlier run suspended stay open, suspended; the other
	// open runs whose sandboxes are gone end.
	if ids, err := p.rt.AdoptSuspended(ctx); len(ids) > 0 || err != nil {
		fmt.Fprintf(c.Log, "holding %d suspended runs of an earlier run: %s (errors: %v)\n", len(ids), strings.Join(ids, ", "), err)
	}
	if !shared {
		if n, err := finishOrphans(ctx, store, h.backend(), time.Now(), p.rt.Suspended); n > 0 || err != nil {
			fmt.Fprintf(c.Log, "finalised %d open runs of an earlier run as failed: their sandboxes are gone (errors: %v)\n", n, err)
		}
	}
	rtOf.Store(p.rt)
	defer p.rt.Close() // stops the heartbeat monitors
	defer func() {     // flushes the spans to OTLP, after the handlers
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.tracing.Shutdown(sctx)
	}()
	sopts := append([]runtime.ServerOption{runtime.WithMetrics(p.metrics)}, h.serverOptions()...)
	var rec *reconcile.Reconciler
	var records *reconcile.Records
	if h.reconciles() && c.ReconcileInterval > 0 {
		if rec, records, err = newReconciler(ctx, c, h, store, p, ln.Addr().String()); err != nil {
			return err
		}
		defer records.Close()
		sopts = append(sopts, runtime.WithCleanup(func(ctx context.Context) (any, error) { return reconcile.View(ctx, records, 20) }))
	}
	if l := h.ledger(); l != nil {
		sopts = append(sopts, runtime.WithCost(costReport(c, l)))
	}
	if inc := c.Incidents; inc != nil {
		sopts = append(sopts, runtime.WithIncidents(func(ctx context.Context) (*incidentreport.Report, error) { return inc(ctx, store, records) }))
	}
	srv, err := runtime.NewServer(p.rt, p.syncer, h.backend(), c.Token, sopts...)
	if err != nil {
		return err
	}
	serveErr := serveUntil(ctx, c, h, p, rec, &gated{gate: gate, hs: hs, served: served, addr: ln.Addr().String()}, srv, ready)
	// Stop: the claims go with the runtime; no heartbeat moves a claim
	// meanwhile.
	_ = p.rt.Close()
	stop := context.Background()
	mine := func(string) bool { return true }
	if shared {
		mine = p.rt.Holds // the runs this replica holds, never another's
	}
	h.stop(stop, store, mine)
	keep := func(id string) bool { return p.rt.Suspended(id) || !mine(id) }
	if n, err := finishOrphans(stop, store, h.backend(), time.Now(), keep); n > 0 || err != nil {
		fmt.Fprintf(c.Log, "finalised %d open runs as failed: the runtime stopped (errors: %v)\n", n, err)
	}
	return serveErr
}

// build makes the syncer, the warm pools, the runtime and its metrics.
func build(ctx context.Context, c Config, h host, repo *gitops.Repo, store runs.Store) (*parts, error) {
	if c.Verify.Packages == nil {
		c.Verify.Packages = store // templates' packages, from their SBOM attestations
	}
	syncer := runtime.NewSyncer(repo, c.Branch, c.Verify, c.SyncInterval, runtime.WithSyncLog(c.Log))
	art := runtime.NewRegistryArtifacts(filepath.Join(c.State, "artifacts"))
	if d, err := syncer.Sync(ctx); err == nil { // a failure is logged by the syncer
		fmt.Fprintf(c.Log, "synced %s\n", d.Summary())
		if err := h.checkTemplates(ctx, d, art); err != nil {
			return nil, err
		}
	}
	wopts := []runtime.WarmOption{runtime.WithWarmLog(c.Log)}
	if l := h.warmLedger(); l != nil {
		wopts = append(wopts, runtime.WithLedger(l))
	}
	warm := runtime.NewWarm(h.backend(), art, wopts...)
	broker, err := runtime.NewBroker(runtime.LocalIssuer, c.CredentialTTL)
	if err != nil {
		return nil, err
	}
	var ckopts []runtime.RuntimeOption
	if c.CheckpointSigner != nil {
		if c.CheckpointRepository != "" {
			if _, err := name.NewRepository(c.CheckpointRepository); err != nil {
				return nil, fmt.Errorf("checkpoint repository %q: %w", c.CheckpointRepository, err)
			}
		}
		st, err := checkpoint.OpenStore(filepath.Join(c.State, CheckpointDir))
		if err != nil {
			return nil, err
		}
		ckopts = append(ckopts, runtime.WithCheckpoints(runtime.Checkpoints{Store: st, Signer: c.CheckpointSigner, Verifier: c.CheckpointSigner,
			Repository: c.CheckpointRepository}))
	}
	topts := []telemetry.TraceOption{telemetry.WithServiceName("slipway-runtime")}
	if c.OTLP {
		topts = append(topts, telemetry.WithOTLP())
	}
	tracing, err := telemetry.NewTracing(ctx, topts...)
	if err != nil {
		return nil, err
	}
	if c.DB != "" && c.LeaderElect && c.Advertise != "" { // replicas on one run store reach each other there
		ckopts = append(ckopts, runtime.WithAddress(c.Advertise))
	}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { d, at, _ := syncer.Current(); return d, at }, warm, store, c.MaxStaleness,
		append([]runtime.RuntimeOption{runtime.WithLog(c.Log), runtime.WithBroker(broker), runtime.WithCredentialRenewal(!c.NoCredentialRenewal),
			runtime.WithTracing(tracing), runtime.WithLogger(c.logger)}, ckopts...)...)
	var mopts []telemetry.Option
	if c.Environment != "" {
		mopts = append(mopts, telemetry.WithEnvironment(c.Environment))
	}
	metrics, err := telemetry.NewMetrics(mopts...)
	if err != nil {
		rt.Close()
		return nil, err
	}
	if l := h.ledger(); l != nil {
		if err := metrics.ObserveStateSeconds(func() []telemetry.StateSample {
			var out []telemetry.StateSample
			for _, t := range l.Totals() {
				out = append(out, telemetry.StateSample{Pool: t.Pool, State: string(t.State), Seconds: t.Seconds})
			}
			return out
		}); err != nil {
			rt.Close()
			return nil, err
		}
	}
	return &parts{syncer: syncer, warm: warm, rt: rt, metrics: metrics, tracing: tracing}, nil
}

// newReconciler is the cleanup reconciler of h's sandboxes, with its
// records in the state directory.
func newReconciler(ctx context.Context, c Config, h host, store runs.Store, p *parts, addr string) (*reconcile.Reconciler, *reconcile.Records, error) {
	// beside the run manifests: shared by the replicas on one PostgreSQL
	// (the next leader carries on the records of the last), else a file
	// in the state directory
	var records *reconcile.Records
	var err error
	if c.DB != "" {
		records, err = reconcile.OpenRecordsPostgres(ctx, c.DB)
	} else {
		records, err = reconcile.OpenRecords(ctx, filepath.Join(c.State, reconcile.RecordsFile))
	}
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	ledger := h.warmLedger()
	rec, err := reconcile.New(reconcile.Config{
		Backend: h.backend(), Runs: store, Records: records, Owner: host + "/" + addr,
		Warm:   func() (map[string]map[string]bool, bool) { return warmGenerations(p.syncer) },
		Synced: func() time.Time { _, at, _ := p.syncer.Current(); return at },
		Held:   p.rt.Holds, Credentials: brokerCredentials{p.rt.Broker()}, Metrics: p.metrics,
		Logger: slog.New(slog.NewJSONHandler(c.rawLog, nil)), Failpoint: c.Failpoint,
		Deleted: func(id string) {
			if ledger != nil {
				ledger.Leave(id, time.Time{}) // its interval ends with it
			}
		},
	})
	if err != nil {
		records.Close()
		return nil, nil, err
	}
	return rec, records, nil
}

// serveUntil serves the API on ln, with the syncer, the warm loop, the
// reconciler and the backend's own work beside it, until ctx ends.
// Everything that may create a sandbox or write a manifest (the syncer, the
// warm loop, the API's handlers) has ended when it returns.
func serveUntil(ctx context.Context, c Config, h host, p *parts, rec *reconcile.Reconciler, g *gated, srv http.Handler, ready func(string)) error {
	ctx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { cancel(); bg.Wait() }()
	bg.Go(func() { p.syncer.Run(ctx) })
	bg.Go(func() { warmLoop(ctx, c.Log, p) })
	h.everyReplica(ctx, &bg)
	// the periodic work: on every replica, or on the Lease's holder only
	periodic := func(ctx context.Context, bg *sync.WaitGroup) {
		if rec != nil {
			bg.Go(func() { rec.Run(ctx, c.ReconcileInterval) })
		}
		h.background(ctx, bg)
	}
	if el := h.elector(); el != nil {
		bg.Go(func() {
			el.Run(ctx, func(lctx context.Context) {
				var work sync.WaitGroup
				periodic(lctx, &work)
				work.Wait()
			})
		})
	} else {
		periodic(ctx, &bg)
	}
	// checkpoints live in this runtime's state directory: each sweeps its own
	if c.CheckpointSigner != nil {
		bg.Go(func() { sweepCheckpoints(ctx, c, p) })
	}
	g.gate.Open(srv)
	if ready != nil {
		ready(g.addr)
	}
	var err error
	stopping := ctx
	select {
	case <-ctx.Done():
	case err = <-g.served: // the listener failed
		stopping = nil
	}
	// Drain: no new claims; the periodic work stops (the Lease is given up
	// once it returned), and so do the warm loop and the syncer; the claims
	// held go on to their release or the drain deadline.
	deadline := time.Now().Add(c.DrainTimeout)
	cancel()
	if stopping != nil {
		p.rt.Drain()
		if c.DB != "" && c.LeaderElect { // the others pass this one's claims on to it
			drainClaims(c, p.rt, deadline)
		}
	}
	sctx, c2 := context.WithTimeout(context.Background(), max(5*time.Second, time.Until(deadline)))
	defer c2()
	_ = g.hs.Shutdown(sctx) // waits for the handlers still running
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gated is the server run started before its database answered: its
// gate, serving, and where it listens.
type gated struct {
	gate   *startup.Gate
	hs     *http.Server
	served <-chan error
	addr   string
}

// warmLoop keeps the warm pools of the syncer's current desired state.
func warmLoop(ctx context.Context, log io.Writer, p *parts) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if d, _, _ := p.syncer.Current(); d != nil {
			if rep := p.warm.Reconcile(ctx, d); len(rep.Created)+len(rep.Deleted)+len(rep.Errors) > 0 {
				fmt.Fprintf(log, "warm pools: %d created, %d deleted, errors %v\n", len(rep.Created), len(rep.Deleted), rep.Errors)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
