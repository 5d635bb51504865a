package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/jobs"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// staticConfig is a configuration held in memory (the plane reads the
// config repository).
type staticConfig struct{ c *tenancy.Config }

func (s staticConfig) Current(context.Context) (*tenancy.Config, error) { return s.c, nil }
func (s staticConfig) ProfileAt(_ context.Context, _, name string) (*tenancy.Versioned[tenancy.Profile], error) {
	p := s.c.Profiles[name]
	return &p, nil
}

// A job is stored queued, admitted within its tenant's concurrency, and a
// second one waits for a slot until it is canceled: a job that never
// started settles every cancellation step at once.
func Example() {
	dir, err := os.MkdirTemp("", "jobs-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	cfg := &tenancy.Config{Revision: "r1",
		Tenants: map[string]tenancy.Versioned[tenancy.Tenant]{"acme": {Value: tenancy.Tenant{Name: "acme",
			Pools: []string{"agents"}, Profiles: []string{"standard"}, Concurrency: 1, QueueBound: 10}, Revision: "r1", Digest: "sha256:t"}},
		Profiles: map[string]tenancy.Versioned[tenancy.Profile]{"standard": {Value: tenancy.Profile{Name: "standard",
			Network: tenancy.Network{Mode: tenancy.NetworkDeny}, MaxDuration: 10 * time.Minute, MaxOutputBytes: 1 << 20, MaxOutputLines: 1000},
			Path: "profiles/standard.yaml", Revision: "r1", Digest: "sha256:p", Raw: []byte("name: standard\n")}}}
	metrics, err := telemetry.NewMetrics()
	if err != nil {
		panic(err)
	}
	tracing, err := telemetry.NewTracing(ctx)
	if err != nil {
		panic(err)
	}
	e, err := jobs.New(ctx, jobs.Config{Store: s, Config: staticConfig{cfg}, Runtimes: map[string][]jobs.Runtime{"agents": nil},
		MaxActive: 4, Reserve: 1, QueueBound: 100, DispatchAttempts: 5, Lease: 15 * time.Second, Grace: 2 * time.Second,
		Events: store.EventConfig{}.WithDefaults(), ID: "example", Logger: slog.New(slog.DiscardHandler), Metrics: metrics, Tracing: tracing,
		ManualAdmission: true, NoDispatch: true})
	if err != nil {
		panic(err)
	}
	defer e.Stop(ctx)

	spec := controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"make", "test"}}}
	first, _, err := e.Submit(ctx, "acme", "", spec)
	if err != nil {
		panic(err)
	}
	second, _, err := e.Submit(ctx, "acme", "", spec)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.State, second.State)
	n, err := e.AdmitOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("admitted", n) // acme's concurrency is 1
	j, err := e.Cancel(ctx, "acme", second.ID, "", "")
	if err != nil {
		panic(err)
	}
	fmt.Println(j.State, j.Reason, len(j.Cancellation.Steps))
	// Output:
	// queued queued
	// admitted 1
	// canceled canceled 10
}
