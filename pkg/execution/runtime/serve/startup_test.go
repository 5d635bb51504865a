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

	"github.com/slipway-dev/slipway/internal/secretfile"
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

// A runtime whose Secrets are not there yet (optional volumes: the files
// are missing) stays up and not ready, and waits for each file in turn:
// /readyz names the part (no path), the log has one line per distinct
// error naming the file and the Secret and key it comes from, never a
// value; a DSN naming a database that does not answer is waited for with
// one line naming its host, and the DSN fixed in the file is taken at the
// next try. The API then takes the token the file holds.
func TestServeWaitsForItsSecretFiles(t *testing.T) {
	pgtest.Need(t)
	pgDir, err := os.MkdirTemp("", "slipway-rtsecret-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pgDir)
	ctx := context.Background()
	pg, err := pgtest.Start(ctx, pgDir)
	if errors.Is(err, pgtest.ErrNotInstalled) {
		need.Missing(t, "%v (run `make deps`)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	repo := configRepo(ctx, t)
	dir := t.TempDir()
	dbDir, tokDir := filepath.Join(dir, "db"), filepath.Join(dir, "token")
	for _, d := range []string{dbDir, tokDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dsnFile, tokFile := filepath.Join(dbDir, "dsn"), filepath.Join(tokDir, "token")
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
		done <- serve.Run(sctx, serve.Config{Repo: repo, State: filepath.Join(dir, "state"), Listen: addr, TokenFile: tokFile, DBFile: dsnFile,
			Mounts: secretfile.Mounts{dbDir: "slipway-db", tokDir: "slipway-runtime-token"},
			Log:    &log, Verify: runtime.Verify{Skip: true}}, func(a string) { ready <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + addr
	waitFor := func(part string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get(base + "/readyz")
			if err == nil {
				var rd struct {
					Failing []struct{ Part, Reason string }
				}
				_ = json.NewDecoder(resp.Body).Decode(&rd)
				resp.Body.Close()
				if resp.StatusCode == 503 && len(rd.Failing) == 1 && rd.Failing[0].Part == part {
					if r := rd.Failing[0].Reason; !strings.Contains(r, "error id e-") || strings.Contains(r, dir) || strings.Contains(r, "slipway-db") {
						t.Fatalf("readyz while waiting for the %s: %q (want the part and an error id, no path)", part, r)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz never named the %s (%v):\n%s", part, err, log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	const token = "rt-file-token-0123456789"
	waitFor("API token file")
	time.Sleep(2 * time.Second) // several tries
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("database DSN file")
	time.Sleep(2 * time.Second)
	// not a DSN it can use: waited for as well (its Secret can be fixed)
	if err := os.WriteFile(dsnFile, []byte("mysql://slipway:pw-never-shown@db/runs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "a postgres://"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line about the DSN that is not one:\n%s", log.String())
		}
	}
	waitFor("database DSN file")
	if err := os.WriteFile(dsnFile, []byte("postgres://slipway:pw-never-shown@127.0.0.1:1/runs?sslmode=disable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("database")
	time.Sleep(2 * time.Second)
	if err := os.WriteFile(dsnFile, []byte(pg.DSN("postgres")), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run ended: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("not ready 60 s after the DSN was fixed:\n%s", log.String())
	}
	for tok, want := range map[string]int{token: 200, apiToken: 401} {
		req, _ := http.NewRequest("GET", base+"/v1/info", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/info with token %q: %d, want %d (the file holds %q)", tok, resp.StatusCode, want, token)
		}
	}
	text := log.String()
	for _, want := range []string{
		"file " + tokFile + " (Secret slipway-runtime-token, key token) does not exist",
		"file " + dsnFile + " (Secret slipway-db, key dsn) does not exist",
		"file " + dsnFile + ": want one line, a postgres:// DSN",
		"127.0.0.1:1",
	} {
		n := 0
		for line := range strings.SplitSeq(text, "\n") {
			if strings.Contains(line, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("log lines naming %q: %d, want 1:\n%s", want, n, text)
		}
	}
	for _, secret := range []string{token, "pw-never-shown"} {
		if strings.Contains(text, secret) {
			t.Errorf("the log shows a secret value %q:\n%s", secret, text)
		}
	}
}
