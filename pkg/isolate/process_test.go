package isolate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// TestKilledLeavesNothing ends a sandbox that runs a foreground and a
// background sleep in each way there is, and checks that Run returned
// promptly and that no process of it is left at that moment.
func TestKilledLeavesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		timeout  time.Duration
		ctx      func() (context.Context, context.CancelFunc)
		err      error // wrapped by Run's error; nil for none
		timedOut bool
		signal   string
		exit     int
	}{
		{name: "timeout", timeout: 300 * time.Millisecond, timedOut: true, signal: "killed", exit: -1},
		{name: "context cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}, err: context.Canceled, signal: "killed", exit: -1},
		{name: "context deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, err: context.DeadlineExceeded, signal: "killed", exit: -1},
		{name: "command exits, background child remains", exit: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secs, cmdline := sleepArgs()
			script := "sleep " + secs + " >/dev/null 2>&1 & sleep " + secs
			if tc.err == nil && !tc.timedOut {
				script = "sleep " + secs + " >/dev/null 2>&1 & echo started"
			}
			s := baseSpec(t, script)
			s.Timeout = tc.timeout
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			start := time.Now()
			res, err := isolate.Run(ctx, s)
			elapsed := time.Since(start)
			if left := procsWithCmdline(t, cmdline); len(left) > 0 {
				t.Errorf("processes left behind: %v", left)
			}
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if res.TimedOut != tc.timedOut || res.Signal != tc.signal || res.ExitCode != tc.exit {
				t.Errorf("got %s, want exit %d signal %q timedOut %v", describe(res), tc.exit, tc.signal, tc.timedOut)
			}
			if elapsed > 5*time.Second || res.Duration > elapsed {
				t.Errorf("Run took %s (Duration %s)", elapsed, res.Duration)
			}
		})
	}
}

// startSleeper starts a sandbox that prints "ready" and sleeps, and waits
// until it is ready.
func startSleeper(t *testing.T, s isolate.Spec) (*isolate.Process, *syncBuffer, string) {
	t.Helper()
	secs, _ := sleepArgs()
	s.Argv = []string{"sh", "-c", `echo "ready $TOKEN"; sleep ` + secs}
	out := &syncBuffer{}
	p, err := isolate.Start(context.Background(), s, out, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	waitFor(t, "ready", func() bool { return strings.HasPrefix(out.String(), "ready") })
	ns, err := os.Readlink("/proc/" + strconv.Itoa(p.SandboxPid()) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	return p, out, ns
}

func TestStartWaitKill(t *testing.T) {
	t.Parallel()
	p, _, ns := startSleeper(t, baseSpec(t, ""))
	if p.Pid() <= 0 || p.Pgid() != p.Pid() || p.SandboxPid() <= 0 || p.SandboxPid() == p.Pid() {
		t.Errorf("Pid %d Pgid %d SandboxPid %d", p.Pid(), p.Pgid(), p.SandboxPid())
	}
	if n := len(procsInPidNS(t, ns)); n < 2 { // bwrap's init, sh, sleep (sh may exec sleep)
		t.Errorf("%d processes in the sandbox, want at least 2", n)
	}
	select {
	case <-p.Done():
		t.Fatal("Done before the sandbox ended")
	default:
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.Signal != "killed" || res.ExitCode != -1 || res.TimedOut {
		t.Fatalf("Wait = %s, %v", describe(res), err)
	}
	<-p.Done()
	if left := procsInPidNS(t, ns); len(left) > 0 {
		t.Errorf("sandbox processes left: %v", left)
	}
	if left := procsInGroup(t, p.Pgid()); len(left) > 0 {
		t.Errorf("process group %d left: %v", p.Pgid(), left)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if again, err := p.Wait(); err != nil || again.Signal != res.Signal || again.Duration != res.Duration {
		t.Errorf("second Wait = %s, %v", describe(again), err)
	}
}

func TestStartSignal(t *testing.T) {
	t.Parallel()
	p, _, ns := startSleeper(t, baseSpec(t, ""))
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := func() bool {
		for _, pid := range procsInPidNS(t, ns) {
			if f := statFields(strconv.Itoa(pid)); pid != p.SandboxPid() && (len(f) < 2 || f[1] != "T") {
				return false
			}
		}
		return true
	}
	waitFor(t, "the command to stop", stopped)
	for _, sig := range []syscall.Signal{syscall.SIGCONT, syscall.SIGTERM} {
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 128+int(syscall.SIGTERM) || res.Signal != "" {
		t.Fatalf("Wait = %s, %v", describe(res), err)
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal after the end succeeded")
	}
}

func TestStartTimeout(t *testing.T) {
	t.Parallel()
	s := baseSpec(t, "")
	s.Timeout = 500 * time.Millisecond
	p, _, ns := startSleeper(t, s)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done after the timeout")
	}
	res, err := p.Wait()
	if err != nil || !res.TimedOut || res.Signal != "killed" {
		t.Fatalf("Wait = %s, %v", describe(res), err)
	}
	if left := procsInPidNS(t, ns); len(left) > 0 {
		t.Errorf("sandbox processes left: %v", left)
	}
}

func TestEnvValuesStayOffCommandLines(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-value"
	s := baseSpec(t, "")
	s.Env["TOKEN"] = secret
	p, out, _ := startSleeper(t, s)
	if got := out.String(); got != "ready "+secret+"\n" {
		t.Errorf("inside, TOKEN gave %q", got)
	}
	for _, pid := range []int{p.Pid(), p.SandboxPid()} {
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("/proc/%d/%s holds the secret", pid, f)
			}
		}
	}
	cmd := strings.Join(p.Command(), " ")
	if strings.Contains(cmd, secret) || !strings.Contains(cmd, "--setenv TOKEN <redacted>") {
		t.Errorf("Command() = %s", cmd)
	}
	_ = p.Kill()
	res, _ := p.Wait()
	if strings.Contains(strings.Join(res.Command, " "), secret) {
		t.Errorf("Result.Command holds the secret")
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	s := baseSpec(t, "true")
	if _, err := isolate.Start(cancelled, s, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context: %v", err)
	}
	s.Argv = nil
	if _, err := isolate.Run(context.Background(), s); !errors.Is(err, isolate.ErrInvalidSpec) {
		t.Errorf("Run with no Argv: %v", err)
	}
}

// TestHostPathsStayOffSandboxCommandLines: every process inside can read
// the command line of the sandbox's pid 1 (a fork of bwrap) and of its
// other ancestors there; none of them names the root or a mount source.
func TestHostPathsStayOffSandboxCommandLines(t *testing.T) {
	t.Parallel()
	s := baseSpec(t, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`)
	src := t.TempDir()
	s.Mounts = []isolate.Mount{{Source: src, Target: "/data", ReadOnly: true}}
	s.Limits = isolate.Limits{NoFile: 256} // through prlimit, which execs bwrap
	res, err := isolate.Run(context.Background(), s)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: exit %d, %v\n%s", res.ExitCode, err, res.Output)
	}
	out := string(res.Output)
	if !strings.Contains(out, "bwrap --args 3 --") {
		t.Errorf("pid 1 is not bwrap with its options in --args:\n%s", out)
	}
	for _, host := range []string{s.Root, src} {
		if strings.Contains(out, host) {
			t.Errorf("a command line inside names the host path %s:\n%s", host, out)
		}
	}
	cmd := strings.Join(res.Command, " ")
	if !strings.Contains(cmd, "--ro-bind "+src+" /data") {
		t.Errorf("Result.Command does not show the mounts bwrap read: %s", cmd)
	}
}

// Limits are set on bwrap itself (prlimit(2)) where the caller may: no
// prlimit(1) process is started first (an exec of its own, 1-4 ms a
// sandbox), and every process inside still runs under them.
func TestLimitsSetWithoutPrlimitProcess(t *testing.T) {
	t.Parallel()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bwrap); err == nil && fi.Mode()&os.ModeSetuid != 0 && os.Geteuid() != 0 {
		t.Skip("a setuid bwrap started by a caller that is not root: prlimit(1) sets the limits")
	}
	s := baseSpec(t, "ulimit -n; ulimit -t; ulimit -v; sh -c 'ulimit -n'")
	s.Limits = isolate.Limits{NoFile: 77, CPUSeconds: 9, AddressSpace: 1 << 30}
	res, err := isolate.Run(context.Background(), s)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: exit %d, %v\n%s", res.ExitCode, err, res.Output)
	}
	if got, want := string(res.Output), "77\n9\n1048576\n77\n"; got != want {
		t.Errorf("limits inside = %q, want %q", got, want)
	}
	if filepath.Base(res.Command[0]) != "bwrap" {
		t.Errorf("the host command is %q, want bwrap first", res.Command)
	}
}

// Stop returns only once every thread of the process is stopped, and fails
// for a process that is gone.
func TestStopWaitsForTheStoppedState(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := isolate.Stop(ctx, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, state, err := isolate.ProcStat(cmd.Process.Pid); err != nil || (state != 'T' && state != 't') {
		t.Fatalf("state after Stop = %q, %v", state, err)
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if err := isolate.Stop(ctx, cmd.Process.Pid); err == nil {
		t.Fatal("Stop of a reaped process: no error")
	}
}
