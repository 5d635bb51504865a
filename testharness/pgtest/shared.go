package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// sharedPrefix names the directories of shared servers under os.TempDir.
const sharedPrefix = "slipway-pgtest-"

// ownerFile, in a shared server's directory, holds the pid of the test
// binary that started it.
const ownerFile = "owner.pid"

var shared struct {
	once sync.Once
	srv  *Server
	err  error
	n    atomic.Int64 // databases made, for unique names
}

// New returns the DSN (postgres://…) of a new, empty database for tb on the
// test binary's shared server, starting the server on first use, and drops
// the database at cleanup. It leaves the test out as Need does.
func New(tb testing.TB) string {
	tb.Helper()
	srv := sharedServer(tb)
	name := dbName(tb.Name(), shared.n.Add(1))
	ctx := context.Background()
	if err := srv.CreateDatabase(ctx, name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.DropDatabase(context.Background(), name); err != nil {
			tb.Errorf("drop the test's database: %v", err)
		}
	})
	return srv.DSN(name)
}

// Shared returns the test binary's shared server, starting it on first use
// (for tests that need the server itself: a second database, a stop). It
// skips like New.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	return sharedServer(tb)
}

// Need leaves tb out under -short ("left out by -short: needs a real
// PostgreSQL"), and when PostgreSQL 15 is not installed skips it naming
// `make deps`, or fails it in CI (see package need). New and Shared call it;
// a test that calls Start itself calls it first.
func Need(tb testing.TB) {
	tb.Helper()
	need.Short(tb, "a real PostgreSQL")
	if _, err := BinDir(); errors.Is(err, ErrNotInstalled) {
		need.Missing(tb, "%v (run `make deps`)", err)
	}
}

func sharedServer(tb testing.TB) *Server {
	tb.Helper()
	Need(tb)
	shared.once.Do(func() { shared.srv, shared.err = startShared() })
	if shared.err != nil {
		tb.Fatalf("start PostgreSQL: %v", shared.err)
	}
	return shared.srv
}

func startShared() (*Server, error) {
	if _, err := BinDir(); err != nil {
		return nil, err
	}
	sweep()
	dir, err := os.MkdirTemp("", sharedPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	srv, err := Start(context.Background(), dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return srv, nil
}

// Main runs the tests of m and then stops the shared server, if one was
// started, and removes its directory. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if srv := shared.srv; srv != nil {
		srv.Close()
		if err := os.RemoveAll(srv.Dir()); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// sweep removes the directories of shared servers whose test binary is
// gone (it died before Main could clean up; its server died with it, by the
// parent-death signal).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), sharedPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // unknown, or its test binary still runs
		}
		if postmasterAlive(dir) {
			continue // never remove a running server's files
		}
		os.RemoveAll(dir)
	}
}

// postmasterAlive says whether the postmaster.pid of dir's cluster names a
// live process.
func postmasterAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && pid > 0 && syscall.Kill(pid, 0) != syscall.ESRCH
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// dbName is a database name for a test: its number and as much of its
// name as fits PostgreSQL's 63 bytes.
func dbName(test string, n int64) string {
	name := fmt.Sprintf("t%d_%s", n, notIdent.ReplaceAllString(strings.ToLower(test), "_"))
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}
