package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/secretfile"
	"github.com/slipway-dev/slipway/internal/startup"
	"github.com/slipway-dev/slipway/pkg/api/incidentreport"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// ServeConfig is `slipway control serve`.
type ServeConfig struct {
	ConfigRepo, Branch string
	// DB is sqlite:PATH or postgres://...
	DB string
	// DBFile, instead of DB, is a file holding the DSN (a mounted
	// Secret): read until it exists and again on each try to reach the
	// database, so a Secret created or fixed after the start is found
	// without a restart.
	DBFile string
	Listen string
	// Runtimes are POOL=URL,TOKEN-FILE; a token file that does not exist
	// yet is waited for.
	Runtimes []string
	// Mounts names the Secret each file (DBFile, the runtimes' token
	// files) is mounted from, for the log line a missing one makes.
	Mounts                secretfile.Mounts
	MaxActive, QueueBound int
	// Reserve: Config.Reserve.
	Reserve              int
	DispatchAttempts     int
	Lease, ConfigRefresh time.Duration
	Grace                time.Duration
	Logger               *slog.Logger
	// Failpoint: see Config.Failpoint (crash tests only).
	Failpoint string
	// Environment labels every metric (environment=...); none when "".
	Environment string
	// OTLP sends traces over OTLP/HTTP too (the exporter reads the
	// standard OTEL_EXPORTER_OTLP_* environment).
	OTLP bool
	// Incidents, when set, serves GET /v1/incidents from the store
	// (Config.Incidents).
	Incidents func(ctx context.Context, st *Store) (*incidentreport.Report, error)
}

// ParseRuntime reads POOL=URL,TOKEN-FILE: the pool, and the runtime with
// the token the file holds.
func ParseRuntime(spec string) (string, Runtime, error) {
	rs, err := splitRuntime(spec)
	if err != nil {
		return "", Runtime{}, err
	}
	rt, err := rs.runtime(nil)
	return rs.pool, rt, err
}

// runtimeSpec is a POOL=URL,TOKEN-FILE before its file is read.
type runtimeSpec struct{ pool, url, host, file string }

func splitRuntime(spec string) (runtimeSpec, error) {
	pool, rest, ok := strings.Cut(spec, "=")
	u, file, ok2 := strings.Cut(rest, ",")
	if !ok || !ok2 || pool == "" || u == "" || file == "" {
		return runtimeSpec{}, fmt.Errorf("--runtime %q: want POOL=URL,TOKEN-FILE", spec)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || pu.User != nil {
		return runtimeSpec{}, fmt.Errorf("--runtime %s: URL %q: want http(s)://host:port without credentials", pool, u)
	}
	return runtimeSpec{pool: pool, url: u, host: pu.Host, file: file}, nil
}

// runtime reads the token file (ErrMissing, secretfile's, while it does
// not exist or is empty: its Secret is not there yet) and makes the client.
func (rs runtimeSpec) runtime(mounts secretfile.Mounts) (Runtime, error) {
	tok, err := mounts.Read(rs.file)
	if err != nil {
		return Runtime{}, fmt.Errorf("--runtime %s: token: %w", rs.pool, err)
	}
	c, err := runtimeapi.NewClient(rs.url, tok)
	if err != nil {
		return Runtime{}, err
	}
	return Runtime{Name: rs.host, Client: c}, nil
}

// Serve runs a control plane until ctx ends: it opens the database and the
// config repository, starts admission, dispatch and recovery, and serves
// the API on c.Listen (ready gets the address).
func Serve(ctx context.Context, c ServeConfig, ready func(addr string)) error {
	if c.ConfigRepo == "" || (c.DB == "") == (c.DBFile == "") || c.Listen == "" {
		return errors.New("control: a config repository, a database (a DSN or a file holding one) and a listen address are required")
	}
	if c.Branch == "" {
		c.Branch = "main"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var specs []runtimeSpec
	for _, s := range c.Runtimes {
		rs, err := splitRuntime(s)
		if err != nil {
			return err
		}
		specs = append(specs, rs)
	}
	if c.DB != "" {
		if err := CheckDSN(c.DB); err != nil {
			return err
		}
	}
	repo, err := gitops.Open(ctx, c.ConfigRepo) // reads the URL, reaches nothing
	if err != nil {
		return err
	}
	// It listens first: while it waits for its config repository and
	// database, /healthz says it lives and /readyz what it waits for
	// (startup.Gate), instead of a crash loop.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	gate := startup.NewGate("control plane", c.Logger)
	srv := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopServing := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	defer stopServing() // on every way out; a second Shutdown is a no-op
	cfg := NewRepoConfig(repo, c.Branch, c.ConfigRefresh)
	if _, err := startup.Wait(ctx, gate, "config repository", "cannot be read", startup.DefaultBackoff, cfg.Current); err != nil {
		return startErr(ctx, err)
	}
	cfg.Log = c.Logger // from now on, a failing refresh keeps the last good configuration
	// The files of Secrets (the runtimes' tokens, the database's DSN) may
	// come after the pod: each is waited for, its log line naming the
	// Secret.
	rts, err := waitRuntimes(ctx, gate, specs, c.Mounts)
	if err != nil {
		return startErr(ctx, err)
	}
	st, err := openStore(ctx, gate, c)
	if err != nil {
		return startErr(ctx, err)
	}
	defer st.Close()
	var mopts []telemetry.Option
	if c.Environment != "" {
		mopts = append(mopts, telemetry.WithEnvironment(c.Environment))
	}
	metrics, err := telemetry.NewMetrics(mopts...)
	if err != nil {
		return err
	}
	for pool := range rts {
		metrics.StartPool(ctx, pool)
	}
	topts := []telemetry.TraceOption{telemetry.WithServiceName("slipway-control")}
	if c.OTLP {
		topts = append(topts, telemetry.WithOTLP())
	}
	tracing, err := telemetry.NewTracing(ctx, topts...)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx)
	}()
	var inc func(ctx context.Context) (*incidentreport.Report, error)
	if c.Incidents != nil {
		inc = func(ctx context.Context) (*incidentreport.Report, error) { return c.Incidents(ctx, st) }
	}
	p, err := New(ctx, Config{Store: st, Config: cfg, Runtimes: rts, MaxActive: c.MaxActive, Reserve: c.Reserve, QueueBound: c.QueueBound,
		DispatchAttempts: c.DispatchAttempts, Lease: c.Lease, Grace: c.Grace, Logger: c.Logger, Failpoint: c.Failpoint,
		Metrics: metrics, Tracing: tracing, Incidents: inc})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	gate.Open(NewServer(p))
	c.Logger.Info("control plane serving", "addr", ln.Addr().String(), "db", st.inner.Dialect(), "replica", p.c.ID)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	stopServing()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, p.Stop(sctx))
}

// waitRuntimes reads the runtimes' token files, waiting (behind gate)
// while one is missing: a Secret may come after the pod.
func waitRuntimes(ctx context.Context, gate *startup.Gate, specs []runtimeSpec, mounts secretfile.Mounts) (map[string][]Runtime, error) {
	return startup.Wait(ctx, gate, "runtime token file", "is missing", startup.DefaultBackoff, func(context.Context) (map[string][]Runtime, error) {
		rts := map[string][]Runtime{}
		for _, rs := range specs {
			rt, err := rs.runtime(mounts)
			if err != nil && !errors.Is(err, secretfile.ErrMissing) {
				return nil, startup.Permanent(err)
			}
			if err != nil {
				return nil, err
			}
			rts[rs.pool] = append(rts[rs.pool], rt)
		}
		return rts, nil
	})
}

// openStore opens the database of c.DB, or of the DSN in c.DBFile (waited
// for while missing or not a DSN, and read again at each try), waiting
// behind gate while it does not answer.
func openStore(ctx context.Context, gate *startup.Gate, c ServeConfig) (*Store, error) {
	dsn := func() (string, error) { return c.DB, nil }
	if c.DBFile != "" {
		dsn = func() (string, error) {
			s, err := c.Mounts.Read(c.DBFile)
			if err != nil {
				return "", err
			}
			if strings.Contains(s, "\n") {
				return "", fmt.Errorf("%w: file %s: want one line, a DSN", ErrBadDSN, c.DBFile)
			}
			if err := CheckDSN(s); err != nil {
				return "", fmt.Errorf("file %s: %w", c.DBFile, err)
			}
			return s, nil
		}
		// A DSN that is not one is waited for too: its Secret can be
		// fixed, and a process that exits on it would crash-loop.
		if _, err := startup.Wait(ctx, gate, "database DSN file", "is missing or not a DSN", startup.DefaultBackoff, func(context.Context) (string, error) {
			s, err := dsn()
			if err != nil && !errors.Is(err, secretfile.ErrMissing) && !errors.Is(err, ErrBadDSN) {
				return "", startup.Permanent(err) // a file that cannot be read
			}
			return s, err
		}); err != nil {
			return nil, err
		}
	}
	return startup.Wait(ctx, gate, "database", "does not answer", startup.DefaultBackoff, func(ctx context.Context) (*Store, error) {
		db, err := dsn() // again: a DSN fixed in its Secret is taken at the next try
		if err != nil {
			return nil, err
		}
		st, err := Open(ctx, db)
		if err != nil && ((errors.Is(err, ErrBadDSN) && c.DBFile == "") || strings.HasPrefix(db, "sqlite:")) {
			return nil, startup.Permanent(err) // a name no retry fixes (but a fix of its file), or a local file
		}
		return st, err
	})
}

// startErr is what Serve returns when its start ends early: nothing when
// ctx ended it (a stop while waiting is a clean one), else err.
func startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
