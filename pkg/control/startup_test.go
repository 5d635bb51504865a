package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/internal/secretfile"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// syncBuffer is a log destination Serve writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines(prefix string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(s.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), prefix) {
			out = append(out, m)
		}
	}
	return out
}

// A control plane started before its config repository exists and while
// its database is down neither exits (a crash loop in a pod) nor hangs
// unseen: it serves /healthz, /readyz names what it waits for (without
// the host or the driver's words), the API answers 503 "starting", the
// log has one line per distinct error however often it retries, and it
// becomes ready by itself when both come.
func TestServeWaitsForRepositoryAndDatabase(t *testing.T) {
	pgtest.Need(t)
	dir, err := os.MkdirTemp("", "slipway-pgstart-") // not t.TempDir: the postgres user must reach it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pg, err := pgtest.Start(context.Background(), dir)
	if errors.Is(err, pgtest.ErrNotInstalled) {
		need.Missing(t, "%v (run `make deps`)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Stop(); err != nil { // the database is down when the plane starts
		t.Fatal(err)
	}
	git := gittest.NewServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	served, ready := make(chan error, 1), make(chan string, 1)
	go func() {
		served <- Serve(ctx, ServeConfig{ConfigRepo: git.URL("config.git"), DB: pg.DSN("postgres"), Listen: addr,
			Logger: slog.New(slog.NewJSONHandler(&log, nil))}, func(a string) { ready <- a })
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	base := "http://" + addr
	// waitFor polls readyz until its first failing part is part (or ready when "").
	waitFor := func(part string) {
		t.Helper()
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
				switch {
				case part == "" && resp.StatusCode == 200 && rd.Ready:
					return
				case part != "" && resp.StatusCode == 503 && len(rd.Failing) == 1 && rd.Failing[0].Part == part:
					if !strings.Contains(rd.Failing[0].Reason, "error id e-") || strings.Contains(rd.Failing[0].Reason, "127.0.0.1") ||
						strings.Contains(rd.Failing[0].Reason, "refused") || strings.Contains(rd.Failing[0].Reason, "config.git") {
						t.Fatalf("readyz while waiting for the %s: %q (want the part and an error id, no detail)", part, rd.Failing[0].Reason)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz never said %q (last: %v)", part, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("config repository")
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz while starting: %v %v", resp, err)
	}
	resp, err := http.Get(base + "/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Error, Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 503 || body.Code != "unavailable" || !strings.Contains(body.Error, "starting") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the API while starting: %d %+v", resp.StatusCode, body)
	}
	time.Sleep(4 * time.Second) // three tries or more
	files := map[string]string{}
	for _, name := range []string{"tenants/acme.yaml", "tenants/globex.yaml", "profiles/standard.yaml", "profiles/short.yaml", "pricing.yaml"} {
		files[name] = fixture(t, name)
	}
	git.Seed(t, "config.git", "main", files)
	waitFor("database")
	time.Sleep(4 * time.Second)
	if err := pg.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ready:
		if a != addr {
			t.Errorf("ready at %s, want %s", a, addr)
		}
	case err := <-served:
		t.Fatalf("serve ended: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready 60 s after the database came back")
	}
	waitFor("")
	if resp, err := http.Get(base + "/v1/jobs"); err != nil || resp.StatusCode != 401 {
		t.Fatalf("the API once ready, without a token: %v %v (want 401)", resp, err)
	}
	// one line per distinct error, each on one line, naming the part
	for _, part := range []string{"config repository", "database"} {
		ls := log.lines("not ready: " + part)
		if len(ls) != 1 {
			t.Errorf("log lines for the %s: %d, want 1 (one per distinct error)", part, len(ls))
			continue
		}
		if e, _ := ls[0]["err"].(string); strings.Contains(e, "\n") || e == "" {
			t.Errorf("the %s's log line: err %q (want one line)", part, e)
		}
	}
	if ls := log.lines("config repository: keeping the last good"); len(ls) != 0 {
		t.Errorf("the start logged a 'last good configuration' it never had: %v", ls)
	}
}

// What no retry can fix ends the start at once with one error.
func TestServeRefusesABadDatabaseName(t *testing.T) {
	git := gittest.NewServer(t)
	t0 := time.Now()
	err := Serve(context.Background(), ServeConfig{ConfigRepo: git.URL("none.git"), DB: "mysql://db/x", Listen: "127.0.0.1:0"}, nil)
	if !errors.Is(err, ErrBadDSN) {
		t.Fatalf("serve with a bad database name: %v", err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Errorf("the refusal took %s", time.Since(t0))
	}
}

// A control plane whose Secrets are not there yet (optional volumes: the
// files are missing) stays up and not ready, and waits for each file in
// turn: /readyz names the part (no path), the log has one line per
// distinct error naming the file and the Secret it comes from, never a
// value; a DSN naming a database that does not answer is waited for with
// one line naming its host, and the DSN fixed in the file is taken at the
// next try, without a restart.
func TestServeWaitsForItsSecretFiles(t *testing.T) {
	git := gittest.NewServer(t)
	files := map[string]string{}
	for _, name := range []string{"tenants/acme.yaml", "tenants/globex.yaml", "profiles/standard.yaml", "profiles/short.yaml", "pricing.yaml"} {
		files[name] = fixture(t, name)
	}
	git.Seed(t, "config.git", "main", files)
	dir := t.TempDir()
	// the repository takes a token, from a file read before each fetch
	gitFile := filepath.Join(dir, "git-token")
	if err := os.WriteFile(gitFile, []byte("git-right-token-0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	git.RequireToken("git-right-token-0123")
	t.Setenv(gitops.EnvToken, "")
	t.Setenv(gitops.EnvTokenFile, gitFile)
	dbDir, tokDir := filepath.Join(dir, "db"), filepath.Join(dir, "runtime-token")
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
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	served, ready := make(chan error, 1), make(chan string, 1)
	go func() {
		served <- Serve(ctx, ServeConfig{ConfigRepo: git.URL("config.git"), DBFile: dsnFile, Listen: addr,
			Runtimes: []string{"default=http://127.0.0.1:1," + tokFile},
			Mounts:   secretfile.Mounts{dbDir: "slipway-db", tokDir: "slipway-runtime-token"},
			Logger:   slog.New(slog.NewJSONHandler(&log, nil))}, func(a string) { ready <- a })
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	waitFor := func(part string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				var rd struct {
					Failing []struct{ Part, Reason string }
				}
				_ = json.NewDecoder(resp.Body).Decode(&rd)
				resp.Body.Close()
				if part == "" && resp.StatusCode == 200 {
					return
				}
				if part != "" && resp.StatusCode == 503 && len(rd.Failing) == 1 && rd.Failing[0].Part == part {
					if r := rd.Failing[0].Reason; !strings.Contains(r, "error id e-") || strings.Contains(r, dir) || strings.Contains(r, "slipway-db") {
						t.Fatalf("readyz while waiting for the %s: %q (want the part and an error id, no path)", part, r)
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz never said %q (last: %v):\n%s", part, err, log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("runtime token file")
	time.Sleep(2 * time.Second) // several tries
	if err := os.WriteFile(tokFile, []byte("rt-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("database DSN file")
	time.Sleep(2 * time.Second)
	// not a DSN it can use: waited for as well (its Secret can be fixed)
	if err := os.WriteFile(dsnFile, []byte("mysql://slipway:pw-never-shown@db/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "a postgres://"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line about the DSN that is not one:\n%s", log.String())
		}
	}
	waitFor("database DSN file")
	// a PostgreSQL that does not answer (nothing listens on port 1), with
	// a password that must never show
	if err := os.WriteFile(dsnFile, []byte("postgres://slipway:pw-never-shown@127.0.0.1:1/slipway\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("database")
	time.Sleep(2 * time.Second)
	if err := os.WriteFile(dsnFile, []byte("sqlite:"+filepath.Join(dir, "control.db")), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("serve ended: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("not ready 60 s after the DSN was fixed:\n%s", log.String())
	}
	waitFor("")
	// the repository refuses the token now in the file: not ready, one
	// line naming the repository and the refusal, however many refreshes
	// fail; ready again once the file holds the right one
	if err := os.WriteFile(gitFile, []byte("git-wrong-token-4567"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("config repository")
	time.Sleep(12 * time.Second) // two refreshes or more
	if err := os.WriteFile(gitFile, []byte("git-right-token-0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("")
	for _, c := range []struct{ prefix, want string }{
		{"not ready: runtime token file", "file " + tokFile + " (Secret slipway-runtime-token, key token) does not exist"},
		{"not ready: database DSN file", "file " + dsnFile + " (Secret slipway-db, key dsn) does not exist"},
		{"not ready: database DSN file", "file " + dsnFile + ": control: bad database name \"mysql://…@db/x\": want sqlite:PATH or a postgres:// URL"},
		{"not ready: database does not answer", "127.0.0.1:1"},
		{"not ready: config repository", git.URL("config.git") + ": fetch main: authentication required"},
	} {
		var ls []map[string]any
		for _, l := range log.lines(c.prefix) {
			if e, _ := l["err"].(string); strings.Contains(e, c.want) {
				ls = append(ls, l)
			}
		}
		if len(ls) != 1 {
			t.Errorf("log lines %q: %d, want 1:\n%s", c.prefix, len(ls), log.String())
			continue
		}
		if e, _ := ls[0]["err"].(string); !strings.Contains(e, c.want) {
			t.Errorf("log line %q: err %q, want %q in it", c.prefix, e, c.want)
		}
	}
	refusals := 0
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(line, "authentication required") {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("lines naming the refusal: %d, want 1:\n%s", refusals, log.String())
	}
	for _, secret := range []string{"rt-secret-0123456789", "pw-never-shown", "git-right-token", "git-wrong-token"} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log shows a secret value %q:\n%s", secret, log.String())
		}
	}
}
