package control

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
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
		if testing.Short() {
			t.Skip("-short: no PostgreSQL")
		}
		s, err := OpenPostgres(context.Background(), pgtest.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

const (
	tenantAcme = `apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: acme
pools: [agents]
profiles: [standard, short]
concurrency: 2
queueBound: 5
budget:
  amount: 5
  period: day
`
	tenantGlobex = `apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: globex
pools: [agents, unpriced]
profiles: [standard]
concurrency: 2
queueBound: 200
`
	profileStandard = `apiVersion: slipway.dev/v1alpha1
kind: Profile
name: standard
network:
  mode: deny
maxDuration: 2m
maxCommandDuration: 1m
output:
  maxBytes: 4096
  maxLines: 100
`
	profileShort = `apiVersion: slipway.dev/v1alpha1
kind: Profile
name: short
network:
  mode: deny
maxDuration: 5s
output:
  maxBytes: 4096
  maxLines: 100
`
	pricing = `apiVersion: slipway.dev/v1alpha1
kind: Pricing
currency: credits
classes:
  standard:
    warm: 0.1
    active: 60
    storage: 0.01
pools:
  agents: standard
`
)

// configRepo is a config repository over git HTTP with two tenants, two
// profiles and a price table (acme's budget of 5 credits fits 2 minutes at
// 60/h only once: 2 credits each, 2 jobs).
func configRepo(t *testing.T) *gitops.Repo {
	t.Helper()
	srv := gittest.NewServer(t)
	url := srv.Seed(t, "config.git", "main", map[string]string{
		"tenants/acme.yaml":      tenantAcme,
		"tenants/globex.yaml":    tenantGlobex,
		"profiles/standard.yaml": profileStandard,
		"profiles/short.yaml":    profileShort,
		"pricing.yaml":           pricing,
	})
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
	t.Cleanup(func() { p.q.close() })
	return p
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
