package control_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control"
)

// staticConfig is a configuration held in memory (a real plane reads the
// config repository: NewRepoConfig).
type staticConfig struct{ c *tenancy.Config }

func (s staticConfig) Current(context.Context) (*tenancy.Config, error) { return s.c, nil }
func (s staticConfig) ProfileAt(_ context.Context, _, name string) (*tenancy.Versioned[tenancy.Profile], error) {
	p := s.c.Profiles[name]
	return &p, nil
}

// A plane over a SQLite store serves the API; a tenant's client submits a
// job (stored, then queued for admission) and a job for a pool the tenant
// may not use (refused with a stable code).
func Example() {
	dir, err := os.MkdirTemp("", "control-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := control.OpenSQLite(ctx, filepath.Join(dir, "control.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	cfg := &tenancy.Config{Revision: "r1",
		Tenants: map[string]tenancy.Versioned[tenancy.Tenant]{"acme": {Value: tenancy.Tenant{Name: "acme",
			Pools: []string{"agents"}, Profiles: []string{"standard"}, Concurrency: 2, QueueBound: 10}, Revision: "r1", Digest: "sha256:t"}},
		Profiles: map[string]tenancy.Versioned[tenancy.Profile]{"standard": {Value: tenancy.Profile{Name: "standard",
			Network: tenancy.Network{Mode: tenancy.NetworkDeny}, MaxDuration: 600e9, MaxOutputBytes: 1 << 20, MaxOutputLines: 1000},
			Path: "profiles/standard.yaml", Revision: "r1", Digest: "sha256:p", Raw: []byte("name: standard\n")}}}
	p, err := control.New(ctx, control.Config{Store: s, Config: staticConfig{cfg},
		Runtimes: map[string][]control.Runtime{"agents": nil}, Delivery: control.DeliveryConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(control.NewServer(p))
	defer srv.Close()

	token, _, err := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "example")
	if err != nil {
		panic(err)
	}
	c, err := controlapi.NewClient(srv.URL, token)
	if err != nil {
		panic(err)
	}
	j, created, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"make", "test"}}, IdempotencyKey: "build-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(j.Tenant, j.Pool, j.Profile.Name, j.Limits.MaxOutputLines, created)
	again, created, _ := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"make", "test"}}, IdempotencyKey: "build-1"})
	fmt.Println(again.ID == j.ID, created)
	_, _, err = c.Submit(ctx, controlapi.Spec{Pool: "gpu", Profile: "standard", Commands: [][]string{{"true"}}})
	var refused *controlapi.APIError
	if errors.As(err, &refused) {
		fmt.Println(refused.Status, refused.Code())
	}
	// Output:
	// acme agents standard 1000 true
	// true false
	// 400 bad_request
}
