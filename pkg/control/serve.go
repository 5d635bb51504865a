package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

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
	DB     string
	Listen string
	// Runtimes are POOL=URL,TOKEN-FILE.
	Runtimes              []string
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
	pool, rest, ok := strings.Cut(spec, "=")
	u, file, ok2 := strings.Cut(rest, ",")
	if !ok || !ok2 || pool == "" || u == "" || file == "" {
		return "", Runtime{}, fmt.Errorf("--runtime %q: want POOL=URL,TOKEN-FILE", spec)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || pu.User != nil {
		return "", Runtime{}, fmt.Errorf("--runtime %s: URL %q: want http(s)://host:port without credentials", pool, u)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", Runtime{}, fmt.Errorf("--runtime %s: token file: %w", pool, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", Runtime{}, fmt.Errorf("--runtime %s: token file %s is empty", pool, file)
	}
	c, err := runtimeapi.NewClient(u, tok)
	if err != nil {
		return "", Runtime{}, err
	}
	return pool, Runtime{Name: pu.Host, Client: c}, nil
}

// Serve runs a control plane until ctx ends: it opens the database and the
// config repository, starts admission, dispatch and recovery, and serves
// the API on c.Listen (ready gets the address).
func Serve(ctx context.Context, c ServeConfig, ready func(addr string)) error {
	if c.ConfigRepo == "" || c.DB == "" || c.Listen == "" {
		return errors.New("control: a config repository, a database and a listen address are required")
	}
	if c.Branch == "" {
		c.Branch = "main"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	rts := map[string][]Runtime{}
	for _, s := range c.Runtimes {
		pool, rt, err := ParseRuntime(s)
		if err != nil {
			return err
		}
		rts[pool] = append(rts[pool], rt)
	}
	if err := CheckDSN(c.DB); err != nil {
		return err
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
	st, err := startup.Wait(ctx, gate, "database", "does not answer", startup.DefaultBackoff, func(ctx context.Context) (*Store, error) {
		st, err := Open(ctx, c.DB)
		if err != nil && (errors.Is(err, ErrBadDSN) || strings.HasPrefix(c.DB, "sqlite:")) {
			return nil, startup.Permanent(err) // a name no retry fixes, or a local file
		}
		return st, err
	})
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

// startErr is what Serve returns when its start ends early: nothing when
// ctx ended it (a stop while waiting is a clean one), else err.
func startErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
