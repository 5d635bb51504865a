package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// A runtime started while its PostgreSQL is down neither exits (a crash
// loop in a pod) nor hangs unseen: /healthz answers, /readyz names the
// database (an error id, not the host or the driver's words), the API
// answers 503 "starting", the log has one line for the error however
// often it retries, and the runtime becomes ready by itself when the
// database comes. A database name no retry can fix ends the start at once.
func TestServeWaitsForItsDatabase(t *testing.T) {
	pgtest.Need(t)
	dir, err := os.MkdirTemp("", "slipway-rtpg-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	pg, err := pgtest.Start(ctx, dir)
	if errors.Is(err, pgtest.ErrNotInstalled) {
		need.Missing(t, "%v (run `make deps`)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	repo := configRepo(ctx, t)

	bad := serve.Config{Repo: repo, State: filepath.Join(t.TempDir(), "bad"), Listen: "127.0.0.1:0", Token: apiToken,
		DB: "mysql://db/runs", Verify: runtime.Verify{Skip: true}}
	if err := serve.Run(ctx, bad, nil); !errors.Is(err, runs.ErrInvalid) {
		t.Fatalf("a database name no retry fixes: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var log serveLog
	sctx, cancel := context.WithCancel(ctx)
	done, ready := make(chan error, 1), make(chan string, 1)
	go func() {
		done <- serve.Run(sctx, serve.Config{Repo: repo, State: filepath.Join(t.TempDir(), "state"), Listen: addr, Token: apiToken,
			DB: pg.DSN("postgres"), Log: &log, Verify: runtime.Verify{Skip: true}}, func(a string) { ready <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			var rd struct {
				Ready   bool
				Failing []struct{ Part, Reason string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&rd)
			resp.Body.Close()
			if resp.StatusCode == 503 && len(rd.Failing) == 1 && rd.Failing[0].Part == "database" {
				if r := rd.Failing[0].Reason; !strings.Contains(r, "error id e-") || strings.Contains(r, "127.0.0.1") || strings.Contains(r, "refused") {
					t.Fatalf("readyz while waiting for the database: %q (want an error id, no detail)", r)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never named the database (%v):\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz while waiting: %v %v", resp, err)
	}
	req, _ := http.NewRequest("GET", base+"/v1/pools", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Error, Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(body.Error, "starting") || strings.Contains(body.Error, "127.0.0.1") {
		t.Fatalf("the API while waiting: %d %+v", resp.StatusCode, body)
	}
	time.Sleep(4 * time.Second) // three tries or more
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ready:
		if a != addr {
			t.Errorf("ready at %s, want %s", a, addr)
		}
	case err := <-done:
		t.Fatalf("run ended: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("not ready 60 s after the database came back:\n%s", log.String())
	}
	if n := strings.Count(log.String(), "not ready: database"); n != 1 {
		t.Errorf("log lines for the database: %d, want 1:\n%s", n, log.String())
	}
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "127.0.0.1") {
			t.Errorf("the driver's error spilled over lines: %q", line)
		}
	}
}
