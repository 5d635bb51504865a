// Package pgtest runs a real PostgreSQL 15 server for tests and benchmarks,
// in the spirit of net/http/httptest and packages registrytest and kubetest.
//
// Start makes a cluster with Debian's initdb (trust authentication, UTF8,
// locale C) in a directory and runs its postgres as a child process on a
// free port of 127.0.0.1, with its unix socket in the same directory and
// settings for tests: fsync, synchronous_commit and full_page_writes off,
// small shared buffers, UTC. Close stops it with pg_ctl (fast shutdown) and
// kills it if that does not finish. postgres is started directly rather
// than through `pg_ctl start`, which daemonises it: as the test binary's own
// child it gets a parent-death signal, so a test binary that dies (a
// timed-out `go test`) takes the server with it, and PostgreSQL's backends
// exit when their postmaster does.
//
// initdb and postgres refuse to run as root. As root, Start runs them as the
// system user "postgres" (Debian's postgresql package creates it), or as
// "nobody" when there is none, and gives the directory to that user.
//
// New gives each test a fresh database (CREATE DATABASE, dropped WITH
// (FORCE) at cleanup) on one server shared by the whole test binary: a
// database takes milliseconds, a server about a second. The shared server
// lives in a directory of its own under os.TempDir (slipway-pgtest-*); Main,
// called from a package's TestMain, stops it and removes the directory once
// the tests are done. Without Main the server dies with the test binary and
// the next New removes the directories of test binaries that are gone.
//
// New leaves the test out under go test -short ("left out by -short: needs a
// real PostgreSQL"), and skips it, naming `make deps`, when PostgreSQL 15 is
// not installed (BinDir: /usr/lib/postgresql/15/bin, or $SLIPWAY_PG_BIN),
// or fails it when CI=true (package need); Need does the same for a test that
// calls Start itself.
//
// Start with ListenAlso listens on another address of this machine too
// (kubetest's bridge, PodGateway) and trusts connections from a CIDR (the
// node's pods): the host's PostgreSQL as a cluster's pods reach it in tests,
// at DSNAlso.
//
// It is not for production use: the server trusts every local connection
// (no password) and runs without crash safety (fsync off).
package pgtest
