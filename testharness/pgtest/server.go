package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned by Start when PostgreSQL 15's binaries are
// missing, so that callers may skip rather than fail.
var ErrNotInstalled = errors.New("PostgreSQL 15 not installed (make deps installs Debian's postgresql)")

// BinDirEnv names the environment variable that overrides DefaultBinDir.
const BinDirEnv = "SLIPWAY_PG_BIN"

// DefaultBinDir is where Debian's postgresql-15 keeps initdb, pg_ctl and
// postgres (they are not on PATH).
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// Superuser is the role initdb creates; DSNs connect as it.
const Superuser = "postgres"

// StartTimeout bounds initdb plus the wait for the server to accept
// connections, unless the context's deadline is sooner.
const StartTimeout = 2 * time.Minute

// StopTimeout bounds the clean stop before Close kills the server.
const StopTimeout = 20 * time.Second

// maxPortAttempts bounds the retries when the free port picked for the
// server is taken by someone else before postgres binds it.
const maxPortAttempts = 5

// settings are the server's command-line settings for tests.
var settings = []string{
	"fsync=off", "synchronous_commit=off", "full_page_writes=off",
	"shared_buffers=32MB", "max_connections=200",
	"timezone=UTC", "log_timezone=UTC",
	"log_min_messages=warning", "log_line_prefix=%m [%p] ",
}

// BinDir returns the directory of initdb, pg_ctl and postgres, or an error
// wrapping ErrNotInstalled.
func BinDir() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		dir = DefaultBinDir
	}
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
	}
	return dir, nil
}

// Server is a running PostgreSQL server on 127.0.0.1. Stop it with Close.
type Server struct {
	bin, dir string
	port     int
	cred     *syscall.Credential // nil: run as ourselves
	cmd      *exec.Cmd
	also     string        // another address it listens on (ListenAlso), or ""
	exited   chan struct{} // closed once the process has been waited for
	waitErr  error         // set before exited is closed

	closeOnce sync.Once
}

// Start makes a cluster in dir/data (dir must exist; it is given to the
// unprivileged user when running as root), starts postgres on a free port
// of 127.0.0.1 with its unix socket and log (postgres.log) in dir, and
// returns once it accepts connections. ctx bounds the start only (at most
// StartTimeout); the server runs until Close.
func Start(ctx context.Context, dir string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		if s.cred, err = unprivileged(dir); err != nil {
			return nil, err
		}
	}
	initdb := s.command(ctx, "initdb", "-D", s.data(), "-U", Superuser, "--auth=trust", "--encoding=UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb %s: %w: %s", s.data(), err, bytes.TrimSpace(out))
	}
	if o.also != "" {
		if err := s.allow(o.clients); err != nil {
			return nil, err
		}
		s.also = o.also
	}
	for attempt := 1; ; attempt++ {
		err := s.start(ctx, 0)
		if errors.Is(err, errPortTaken) && attempt < maxPortAttempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

var errPortTaken = errors.New("port taken")

// unprivileged returns the credentials of the user postgres runs as when
// we are root ("postgres", else "nobody") and gives dir to that user.
func unprivileged(dir string) (*syscall.Credential, error) {
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgtest: initdb refuses root, and there is no user postgres or nobody to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user %s: %w", u.Username, err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, fmt.Errorf("pgtest: give %s to user %s: %w", dir, u.Username, err)
	}
	// the user must be able to reach dir: its parents are ours (a test's
	// temporary directories are 0700)
	for p := filepath.Dir(dir); p != "/" && p != "."; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", p, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return nil, fmt.Errorf("pgtest: user %s cannot enter %s (mode %v): put the server's directory elsewhere", u.Username, p, fi.Mode().Perm())
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command is bin/name with args, run as the unprivileged user if any.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"LC_ALL=C", "TZ=UTC", "PATH=" + s.bin + ":/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	return cmd
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// start runs postgres on port (a free one when 0) and waits until it
// accepts connections.
func (s *Server) start(ctx context.Context, port int) error {
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	listen := "127.0.0.1"
	if s.also != "" {
		listen += "," + s.also
	}
	args := []string{"-D", s.data(), "-p", strconv.Itoa(port), "-c", "listen_addresses=" + listen,
		"-c", "unix_socket_directories=" + s.dir}
	for _, v := range settings {
		args = append(args, "-c", v)
	}
	// not CommandContext: ctx bounds the start, not the server's life
	cmd := s.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd, s.port, s.exited = cmd, port, make(chan struct{})
	go func(exited chan struct{}) {
		s.waitErr = cmd.Wait()
		close(exited)
	}(s.exited)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			if bytes.Contains(log, []byte("could not bind")) || bytes.Contains(log, []byte("already in use")) {
				return errPortTaken
			}
			return fmt.Errorf("pgtest: postgres exited (%v): %s", s.waitErr, tail(log))
		case <-ctx.Done():
			s.kill()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("pgtest: postgres did not accept connections: %w (last: %v): %s", ctx.Err(), err, tail(log))
		case <-tick.C:
		}
	}
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory (data, socket and log).
func (s *Server) Dir() string { return s.dir }

// DSN is the URL of database db on the server, as the superuser.
func (s *Server) DSN(db string) string { return s.dsn("127.0.0.1", db) }

// DSNAlso is DSN at the address of ListenAlso, as its clients reach it
// ("" without ListenAlso).
func (s *Server) DSNAlso(db string) string {
	if s.also == "" {
		return ""
	}
	return s.dsn(s.also, db)
}

func (s *Server) dsn(host, db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Host: net.JoinHostPort(host, strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDatabase creates database name (a plain identifier).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops database name, ending its connections first.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (s *Server) admin(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("pgtest: %s: %w", stmt, err)
	}
	return nil
}

// Stop stops the server (fast shutdown: sessions are ended) and leaves it
// to Restart: a test of a database that goes away for a while.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	out, err := s.command(ctx, "pg_ctl", "stop", "-D", s.data(), "-m", "fast", "-w").CombinedOutput()
	<-s.exited
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Restart starts a stopped server again on the same port.
func (s *Server) Restart(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	return s.start(ctx, s.port)
}

// Close stops the server (pg_ctl stop, fast shutdown: sessions are ended,
// nothing is waited for), and kills it if it has not stopped within
// StopTimeout. It leaves the directory to its owner.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		select {
		case <-s.exited:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		stop := s.command(ctx, "pg_ctl", "stop", "-D", s.data(), "-m", "fast", "-w", "-t", strconv.Itoa(int(StopTimeout/time.Second)))
		_ = stop.Run()
		select {
		case <-s.exited:
		case <-ctx.Done():
			s.kill()
		}
	})
}

// kill kills postgres's process group and waits for it.
func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a log, for error messages.
func tail(log []byte) string {
	const n = 2000
	s := strings.TrimSpace(string(log))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
