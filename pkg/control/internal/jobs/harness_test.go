package jobs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forEachStore runs f on a fresh SQLite store and a fresh PostgreSQL one
// (a real PostgreSQL 15 server).
func forEachStore(t *testing.T, f func(t *testing.T, s *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "control.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		pgtest.Need(t)
		s, err := store.OpenPostgres(context.Background(), pgtest.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

// fixtureDir is pkg/control's: the config repository's files the plane's
// tests start from too (two tenants, two profiles and a price table).
const fixtureDir = "../../testdata/config"

// fixture is a file of fixtureDir, e.g. "tenants/acme.yaml".
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// configRepo is a config repository over git HTTP with the fixture's two
// tenants, two profiles and price table (acme's budget of 5 credits fits 2
// minutes at 60/h only once: 2 credits each, 2 jobs).
func configRepo(t *testing.T) *gitops.Repo {
	t.Helper()
	srv := gittest.NewServer(t)
	files := map[string]string{}
	for _, name := range []string{"tenants/acme.yaml", "tenants/globex.yaml", "profiles/standard.yaml", "profiles/short.yaml", "pricing.yaml"} {
		files[name] = fixture(t, name)
	}
	repo, err := gitops.Open(context.Background(), srv.Seed(t, "config.git", "main", files), gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func commit(t *testing.T, repo *gitops.Repo, subject string, edit func(*gitops.Tree) error) {
	t.Helper()
	_, err := repo.Update(context.Background(), gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			if err := edit(tr); err != nil {
				return nil, err
			}
			return &gitops.Commit{Subject: subject}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
}

// repoSource reads the configuration from the repository's main branch
// on every call, one call at a time (a gitops.Repo is not for concurrent
// reads; the plane's RepoConfig also caches).
type repoSource struct {
	mu   sync.Mutex
	repo *gitops.Repo
}

func (r *repoSource) Current(ctx context.Context) (*tenancy.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return tenancy.Load(ctx, r.repo, "main")
}

func (r *repoSource) ProfileAt(ctx context.Context, revision, name string) (*tenancy.Versioned[tenancy.Profile], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return tenancy.ProfileAt(ctx, r.repo, "main", revision, name)
}

// newEngine is an engine on s that admits (by AdmitOnce only) but does not
// dispatch (no runtime: the tests of dispatch run real runtimes in
// cmd/slipway/cli), with the plane's defaults.
func newEngine(t *testing.T, s *store.Store, repo *gitops.Repo, maxActive int) *Engine {
	t.Helper()
	ctx := context.Background()
	metrics, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	tracing, err := telemetry.NewTracing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := store.EventConfig{}.WithDefaults()
	s.SetEventConfig(events)
	e, err := New(ctx, Config{Store: s, Config: &repoSource{repo: repo}, Runtimes: map[string][]Runtime{"agents": nil, "unpriced": nil},
		MaxActive: maxActive, Reserve: maxActive / 4, QueueBound: 50, DispatchAttempts: 5, Lease: 15e9, Grace: 2e9, Events: events,
		ID: "test", Logger: slog.New(slog.DiscardHandler), Metrics: metrics, Tracing: tracing, NoDispatch: true, ManualAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(ctx) })
	return e
}

func wantErr(t *testing.T, err error, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", contains)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not contain %q", err, c)
		}
	}
}

func cmd(s ...string) [][]string { return [][]string{s} }
