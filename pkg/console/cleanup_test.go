package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/control"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

const runtimeToken = "console-test-runtime-token-0123"

// startRuntime serves a runtime API (no pools, no sandboxes) over a fresh
// run store, with opts.
func startRuntime(t *testing.T, opts ...runtime.ServerOption) string {
	t.Helper()
	ctx := context.Background()
	rs, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	be, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	d := &runtime.Desired{Revision: "r1", Pools: map[string]*runtime.PoolDesired{}}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir())), rs, time.Minute)
	srv, err := runtime.NewServer(rt, nil, be, runtimeToken, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// startControl serves a control plane on SQLite (no runtime: it only
// answers who a token is) and returns its URL and an operator token.
func startControl(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	repo, err := gitops.Open(ctx, gittest.NewServer(t).Seed(t, "config.git", "main", map[string]string{"README.md": "config\n"}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := control.OpenSQLite(ctx, filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p, err := control.New(ctx, control.Config{Store: s, Config: control.NewRepoConfig(repo, "main", time.Minute), Runtimes: map[string][]control.Runtime{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	hs := httptest.NewServer(control.NewServer(p))
	t.Cleanup(hs.Close)
	tok, _, err := s.CreateToken(ctx, "ops", controlapi.ScopeOperator, "test")
	if err != nil {
		t.Fatal(err)
	}
	return hs.URL, tok
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The cleanup page reads each runtime's GET /v1/cleanup (the reconciler's
// own records, read by reconcile.View as the runtime serves them) and says
// so plainly of a runtime that runs no reconciler; the operator's
// question "What cleanup remains?" links to it.
func TestCleanupPage(t *testing.T) {
	ctx := context.Background()
	records, err := reconcile.OpenRecords(ctx, filepath.Join(t.TempDir(), "cleanup.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { records.Close() })
	withCleanup := startRuntime(t, runtime.WithCleanup(func(ctx context.Context) (any, error) { return reconcile.View(ctx, records, 20) }))
	without := startRuntime(t)
	cp, ops := startControl(t)
	srv, err := console.New(cp, console.WithRuntime("a", withCleanup, runtimeToken), console.WithRuntime("b", without, runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	code, body := get(t, hs.URL+"/cleanup", ops)
	if code != http.StatusOK {
		t.Fatalf("GET /cleanup: %d\n%s", code, body)
	}
	a, b, ok := strings.Cut(body, "Runtime b")
	if !ok || !strings.Contains(a, "Runtime a") {
		t.Fatalf("the page does not name both runtimes:\n%s", body)
	}
	if !strings.Contains(a, "Remaining: 0") || !strings.Contains(a, "no cleanup remains") || strings.Contains(a, "runs no cleanup reconciler") {
		t.Errorf("runtime a serves its (empty) records; the page says otherwise:\n%s", a)
	}
	if !strings.Contains(b, "runs no cleanup reconciler") || strings.Contains(b, "Remaining:") {
		t.Errorf("runtime b serves no cleanup records; the page says otherwise:\n%s", b)
	}
	if _, q := get(t, hs.URL+"/questions", ops); !strings.Contains(q, `<a href="/cleanup">`) {
		t.Errorf("the questions page does not link the cleanup page:\n%s", q)
	}
	// a runtime token refused is the runtime's answer, not "no reconciler"
	bad, err := console.New(cp, console.WithRuntime("a", withCleanup, "wrong-token-wrong-token-0000"))
	if err != nil {
		t.Fatal(err)
	}
	hb := httptest.NewServer(bad)
	t.Cleanup(hb.Close)
	if code, body := get(t, hb.URL+"/cleanup", ops); code == http.StatusOK || strings.Contains(body, "runs no cleanup reconciler") {
		t.Errorf("a refused runtime token: %d\n%s", code, body)
	}
}
