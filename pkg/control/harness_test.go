package control

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forEachStore runs f on a fresh SQLite store and a fresh PostgreSQL one
// (a real PostgreSQL 15 server).
func forEachStore(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "control.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		pgtest.Need(t)
		s, err := OpenPostgres(context.Background(), pgtest.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

// fixtureDir holds the config repository's files the tests start from:
// two tenants, two profiles and a price table (the job engine's tests in
// internal/jobs read the same).
const fixtureDir = "testdata/config"

// fixture is a file of fixtureDir, e.g. "tenants/acme.yaml".
func fixture(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// configRepo is a config repository over git HTTP with two tenants, two
// profiles and a price table (acme's budget of 5 credits fits 2 minutes at
// 60/h only once: 2 credits each, 2 jobs).
func configRepo(t *testing.T) *gitops.Repo {
	t.Helper()
	srv := gittest.NewServer(t)
	files := map[string]string{}
	for _, name := range []string{"tenants/acme.yaml", "tenants/globex.yaml", "profiles/standard.yaml", "profiles/short.yaml", "pricing.yaml"} {
		files[name] = fixture(t, name)
	}
	url := srv.Seed(t, "config.git", "main", files)
	repo, err := gitops.Open(context.Background(), url, gitops.WithDepth(0))
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

// newPlane is a plane on s that admits but does not dispatch (no runtime:
// the tests of dispatch run real runtimes in cmd/slipway/cli).
func newPlane(t *testing.T, s *Store, repo *gitops.Repo, maxActive int) *Plane {
	t.Helper()
	p, err := New(context.Background(), Config{Store: s, Config: NewRepoConfig(repo, "main", time.Millisecond),
		Runtimes: map[string][]Runtime{"agents": nil, "unpriced": nil}, MaxActive: maxActive, QueueBound: 50, noDispatch: true, manualAdmission: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func cmd(s ...string) [][]string { return [][]string{s} }

// newOutput starts job j's output stream as the job engine does, counting
// it in streams (the streams sharing EventConfig.InFlightBytes).
func newOutput(p *Plane, streams *atomic.Int64, j *controlapi.Job) *stream.Output {
	return stream.NewOutput(p.st, j, p.c.Events, streams, p.c.Logger.Warn)
}

func tp(t time.Time) *time.Time { t = t.UTC(); return &t }
