package control_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

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

// A program beside the plane (the CLI's `tenant token` and `incidents`)
// opens its database to manage the tenants' tokens and read jobs back.
func ExampleStore() {
	dir, err := os.MkdirTemp("", "control-store-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := control.Open(ctx, "sqlite:"+filepath.Join(dir, "control.db"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	text, tok, err := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "ci")
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(text, "swt_"+tok.ID+"_"), tok.Tenant, tok.Scope, tok.Label)
	if err := s.RevokeToken(ctx, tok.ID); err != nil {
		panic(err)
	}
	ts, err := s.ListTokens(ctx, "acme")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ts), ts[0].RevokedAt != nil, strings.Contains(fmt.Sprint(ts), text))
	fmt.Println(errors.Is(s.RevokeToken(ctx, tok.ID), control.ErrNotFound))
	_, _, err = s.Events(ctx, "acme", "j-none", 0, 0)
	fmt.Println(errors.Is(err, control.ErrNotFound))
	// Output:
	// true acme tenant ci
	// 1 true false
	// true
	// true
}
