package pgtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		child()
		return
	}
	Main(m)
}

// Each New is its own database on one server, reachable by its DSN, and
// the server runs as an unprivileged user.
func TestNewDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := New(t), New(t)
	if a == b {
		t.Fatalf("two New calls gave the same DSN %s", a)
	}
	for i, dsn := range []string{a, b} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE t (v int)`); err != nil {
			t.Fatalf("database %d: %v", i, err)
		}
		var version, fsync, user string
		if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num'), current_setting('fsync'),
			(SELECT usename FROM pg_user WHERE usesysid = (SELECT datdba FROM pg_database WHERE datname = 'template1'))`).Scan(&version, &fsync, &user); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(version, "15") || fsync != "off" || user != Superuser {
			t.Errorf("server_version_num %s, fsync %s, owner %s; want 15xxxx, off, %s", version, fsync, user, Superuser)
		}
	}
	srv := Shared(t)
	if os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(srv.Dir(), "data"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
			t.Errorf("the cluster belongs to root")
		}
	}
	if _, err := os.Stat(filepath.Join(srv.Dir(), ".s.PGSQL."+strconv.Itoa(srv.Port()))); err != nil {
		t.Errorf("no unix socket in the server's directory: %v", err)
	}
}

// The database of a test is dropped at its cleanup, open connections and all.
func TestNewDropsAtCleanup(t *testing.T) {
	Need(t)
	ctx := context.Background()
	var dsn string
	var conn *pgx.Conn
	t.Run("inner", func(t *testing.T) {
		dsn = New(t)
		var err error
		if conn, err = pgx.Connect(ctx, dsn); err != nil {
			t.Fatal(err)
		}
	})
	defer conn.Close(ctx)
	if _, err := pgx.Connect(ctx, dsn); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("after cleanup, connecting to %s: %v; want: database does not exist", dsn, err)
	}
}

// Close stops a server started in a directory of the caller's: it no longer
// accepts connections and its process is gone.
func TestStartClose(t *testing.T) {
	ctx := context.Background()
	Need(t)
	dir := testDir(t)
	srv, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := srv.cmd.Process.Pid
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	srv.Close()
	srv.Close() // twice is fine
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection still works after Close")
	}
	if _, err := pgx.Connect(ctx, srv.DSN("postgres")); err == nil {
		t.Error("the server accepts connections after Close")
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("postgres (pid %d) is still there after Close: %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid after a clean stop: %v", err)
	}
}

const childEnv = "PGTEST_CHILD_DIR"

// child starts a server, prints its pid and waits to be killed.
func child() {
	srv, err := Start(context.Background(), os.Getenv(childEnv))
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(srv.cmd.Process.Pid) + "\n")
	time.Sleep(time.Hour)
}

// A test binary killed with SIGKILL takes its server with it.
func TestServerDiesWithTestBinary(t *testing.T) {
	Need(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+testDir(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child: %s", line)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("postgres (pid %d) is not running: %v", pid, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("postgres (pid %d) outlived its test binary by 10 s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testDir is a directory the unprivileged user can enter (t.TempDir's
// parents are 0700), removed at cleanup.
func testDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "pgtest-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestDBName(t *testing.T) {
	for _, c := range []struct {
		test string
		n    int64
		want string
	}{
		{"TestX", 1, "t1_testx"},
		{"TestX/sub-test #2", 12, "t12_testx_sub_test_2"},
		{strings.Repeat("A", 100), 3, "t3_" + strings.Repeat("a", 60)},
	} {
		if got := dbName(c.test, c.n); got != c.want {
			t.Errorf("dbName(%q, %d) = %q, want %q", c.test, c.n, got, c.want)
		}
	}
}

// ListenAlso refuses what is not one address of this machine's besides
// loopback, or clients that are not a CIDR, naming what it got; Start
// refuses it before it makes anything.
func TestListenAlsoBadInput(t *testing.T) {
	for _, tc := range []struct{ ip, clients, want string }{
		{"127.0.0.1", "10.0.0.0/24", `ListenAlso address "127.0.0.1"`},
		{"0.0.0.0", "10.0.0.0/24", `ListenAlso address "0.0.0.0"`},
		{"db.example", "10.0.0.0/24", `ListenAlso address "db.example"`},
		{"10.217.42.1", "10.217.42.0", `ListenAlso clients "10.217.42.0"`},
	} {
		dir := t.TempDir()
		_, err := Start(context.Background(), dir, ListenAlso(tc.ip, tc.clients))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ListenAlso(%q, %q): error %v, want one naming %s", tc.ip, tc.clients, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("ListenAlso(%q, %q): Start left %d entries in its directory", tc.ip, tc.clients, len(entries))
		}
	}
}
