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
	Incidents func(ctx context.Context, st *Store) (any, error)
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
	repo, err := gitops.Open(ctx, c.ConfigRepo)
	if err != nil {
		return err
	}
	cfg := NewRepoConfig(repo, c.Branch, c.ConfigRefresh)
	cfg.Log = c.Logger
	if _, err := cfg.Current(ctx); err != nil {
		return fmt.Errorf("control: config repository %s: %w", repo.URL(), err)
	}
	st, err := Open(ctx, c.DB)
	if err != nil {
		return err
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
	var inc func(ctx context.Context) (any, error)
	if c.Incidents != nil {
		inc = func(ctx context.Context) (any, error) { return c.Incidents(ctx, st) }
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
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		_ = p.Stop(context.Background())
		return err
	}
	srv := &http.Server{Handler: NewServer(p), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c.Logger.Info("control plane serving", "addr", ln.Addr().String(), "db", st.inner.Dialect(), "replica", p.c.ID)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return errors.Join(err, p.Stop(sctx))
}
