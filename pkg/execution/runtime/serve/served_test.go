package serve_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release"
)

// configRepo is a bare config repository whose main branch holds pool
// agents and nothing else.
func configRepo(ctx context.Context, t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	return repo
}

// served is a runtime serve.Run started by a test, listening on a port of
// 127.0.0.1 with apiToken, its log kept.
type served struct {
	addr   string
	log    *serveLog
	cancel context.CancelFunc
	done   chan error
}

// startServed runs serve.Run with c (Token and Log set here, Listen when
// unset) until
// it is ready; the test fails if it ends or is not ready within a minute.
func startServed(ctx context.Context, t *testing.T, c serve.Config) *served {
	t.Helper()
	s := &served{log: &serveLog{}, done: make(chan error, 1)}
	c.Token, c.Log = apiToken, s.log
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	t.Cleanup(cancel)
	ready := make(chan string, 1)
	go func() { s.done <- serve.Run(sctx, c, func(addr string) { ready <- addr }) }()
	select {
	case s.addr = <-ready:
	case err := <-s.done:
		t.Fatalf("Serve: %v\n%s", err, s.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("Serve did not start:\n%s", s.log.String())
	}
	return s
}

// stop ends the runtime and waits for serve.Run to return without error.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
}
