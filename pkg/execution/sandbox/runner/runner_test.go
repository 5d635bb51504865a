package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// serve starts a runner in-process on a unix socket (commands run on the
// host, without a sandbox) and returns a client and the socket's path.
func serve(t *testing.T) (*runner.Client, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "r.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Serve(ctx, ln, runner.Config{
			Digest: "sha256:" + strings.Repeat("ab", 32), Generation: "g-1", SandboxID: "sb-1",
			Workdir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", "BASE=base"},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return runner.NewClient(runner.DialUnix(sock)), sock
}

func TestIdentityAndPing(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	id, err := c.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.RunnerBinarySHA256 != "sha256:"+strings.Repeat("ab", 32) || id.Generation != "g-1" || id.SandboxID != "sb-1" ||
		id.ProtocolVersion != runner.ProtocolVersion || id.Pid != os.Getpid() || id.Started.IsZero() {
		t.Errorf("identity = %+v", id)
	}
	p, err := c.Ping(ctx)
	if err != nil || p.Time.IsZero() {
		t.Errorf("ping = %+v, %v", p, err)
	}
}

func TestSelfDigest(t *testing.T) {
	got, err := runner.SelfDigest()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	want, err := runner.FileDigest(exe)
	if err != nil || got != want {
		t.Errorf("SelfDigest = %s, the test binary is %s (%v)", got, want, err)
	}
}

func TestExec(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	tests := []struct {
		name           string
		req            runner.ExecRequest
		stdout, stderr string
		code           int
		check          func(*runner.ExitStatus) bool
	}{
		{"echo", runner.ExecRequest{Argv: []string{"echo", "hi"}}, "hi\n", "", 0, nil},
		{"exit code and streams", runner.ExecRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, "out\n", "err\n", 3, nil},
		{"environment", runner.ExecRequest{Argv: []string{"sh", "-c", `echo "$BASE $ADDED"`}, Env: map[string]string{"ADDED": "added"}}, "base added\n", "", 0, nil},
		{"environment override", runner.ExecRequest{Argv: []string{"sh", "-c", `echo "$BASE"`}, Env: map[string]string{"BASE": "over"}}, "over\n", "", 0, nil},
		{"stdin", runner.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("in\n")}, "in\n", "", 0, nil},
		{"dir", runner.ExecRequest{Argv: []string{"pwd"}, Dir: "/"}, "/\n", "", 0, nil},
		{"signal", runner.ExecRequest{Argv: []string{"sh", "-c", "kill -9 $$"}}, "", "", -1,
			func(s *runner.ExitStatus) bool { return s.Signal == "killed" && !s.TimedOut }},
		{"truncated", runner.ExecRequest{Argv: []string{"sh", "-c", "head -c 5000 /dev/zero; head -c 5000 /dev/zero >&2"}, MaxOutput: 6000}, "", "", 0,
			func(s *runner.ExitStatus) bool { return s.Truncated && s.OutputBytes == 10000 }},
		{"timeout", runner.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutMs: 100}, "", "", -1,
			func(s *runner.ExitStatus) bool {
				return s.TimedOut && s.Signal == "terminated" && s.Stop == runner.StopTerminated && s.DurationMs < 5000
			}},
		// At the timeout the group gets SIGTERM: a command that exits on it
		// within the grace was terminated, with its own exit code.
		{"timeout, exits on TERM", runner.ExecRequest{Argv: []string{"sh", "-c", "trap 'echo bye; exit 0' TERM; echo hi; sleep 100 & wait"}, TimeoutMs: 300, GraceMs: 5000}, "hi\nbye\n", "", 0,
			func(s *runner.ExitStatus) bool {
				return s.TimedOut && s.Signal == "" && s.Stop == runner.StopTerminated && s.DurationMs < 5000
			}},
		// One that ignores it is killed once the grace has passed.
		{"timeout, ignores TERM", runner.ExecRequest{Argv: []string{"sh", "-c", "trap '' TERM; sleep 100"}, TimeoutMs: 200, GraceMs: 500}, "", "", -1,
			func(s *runner.ExitStatus) bool {
				return s.TimedOut && s.Signal == "killed" && s.Stop == runner.StopKilled && s.DurationMs >= 700 && s.DurationMs < 700+3000
			}},
		{"exits by itself", runner.ExecRequest{Argv: []string{"true"}, TimeoutMs: 10000}, "", "", 0,
			func(s *runner.ExitStatus) bool { return !s.TimedOut && s.Stop == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			st, err := c.Exec(ctx, tt.req, &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "truncated" {
				if stdout.Len()+stderr.Len() != 6000 {
					t.Errorf("streamed %d+%d bytes, want 6000", stdout.Len(), stderr.Len())
				}
			} else if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("output %q %q, want %q %q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
			if st.ExitCode != tt.code || (tt.check != nil && !tt.check(st)) {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	c, sock := serve(t)
	ctx := context.Background()
	for _, argv := range [][]string{{"no-such-command-xyz"}, {"/etc/passwd"}, {}} {
		_, err := c.Exec(ctx, runner.ExecRequest{Argv: argv}, nil, nil)
		want := runner.ErrStart
		if len(argv) == 0 {
			want = runner.ErrRemote
		}
		if !errors.Is(err, want) {
			t.Errorf("exec %q: %v, want %v", argv, err, want)
		}
	}
	if _, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}, Dir: "/no/such/dir"}, nil, nil); !errors.Is(err, runner.ErrStart) {
		t.Errorf("bad dir: %v", err)
	}
	if _, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}, MaxOutput: runner.MaxOutputLimit + 1}, nil, nil); !errors.Is(err, runner.ErrRemote) {
		t.Errorf("max output over the limit: %v", err)
	}
	for _, g := range []int64{-1, runner.MaxGraceMs + 1} {
		if _, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}, GraceMs: g}, nil, nil); !errors.Is(err, runner.ErrRemote) || !strings.Contains(err.Error(), "graceMs") {
			t.Errorf("graceMs %d: %v, want a refusal naming graceMs", g, err)
		}
	}

	// Raw protocol: a version the runner does not speak, an unknown op,
	// and garbage each get an error frame.
	for _, line := range []string{`{"v":99,"op":"ping"}`, `{"v":1,"op":"dance"}`, `not json`} {
		f := rawCall(t, sock, line)
		if f.Type != runner.FrameError || f.Error == nil {
			t.Errorf("%s: got %+v", line, f)
		}
		if line[2] == 'v' && line[5] == '9' && !errors.Is(f.Error, runner.ErrVersion) {
			t.Errorf("%s: %v, want ErrVersion", line, f.Error)
		}
	}
	unreachable := runner.NewClient(runner.DialUnix(filepath.Join(t.TempDir(), "none.sock")))
	if _, err := unreachable.Ping(ctx); !errors.Is(err, runner.ErrUnavailable) {
		t.Errorf("ping of nothing: %v", err)
	}
}

func rawCall(t *testing.T, sock, line string) *runner.Frame {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintln(conn, line)
	b, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var f runner.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// Cancelling the caller's context kills the command and what it started;
// a heartbeat runs beside a long exec.
func TestExecCancelAndConcurrentPing(t *testing.T) {
	c, _ := serve(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var execErr error
	wg.Go(func() {
		_, execErr = c.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + "; wait"}}, nil, nil)
	})
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the command did not start")
	}
	p, err := c.Ping(context.Background())
	if err != nil || p.Running != 1 {
		t.Errorf("ping during exec = %+v, %v", p, err)
	}
	cancel()
	wg.Wait()
	if !errors.Is(execErr, context.Canceled) {
		t.Errorf("cancelled exec: %v", execErr)
	}
	for time.Now().Before(deadline) && syscall.Kill(child, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(child, 0); err == nil {
		_ = syscall.Kill(child, syscall.SIGKILL)
		t.Error("the background child of a cancelled command still runs")
	}
}

// Output arrives while the command runs, not at its end.
func TestExecStreams(t *testing.T) {
	c, _ := serve(t)
	pr, pw := ioPipe()
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), runner.ExecRequest{Argv: []string{"sh", "-c", "echo first; sleep 30"}, TimeoutMs: 20000}, pw, nil)
		done <- err
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	select {
	case err := <-done:
		t.Fatalf("exec ended early: %v", err)
	default:
	}
}

func ioPipe() (*os.File, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	return r, w
}
