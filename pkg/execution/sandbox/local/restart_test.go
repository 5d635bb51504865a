package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// A new Backend on the same state directory finds the running sandbox with
// its pool, generation and owner, talks to it, and deletes it without a
// trace.
func TestRestartedBackendFindsAndDeletes(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	spec := specFor(t, templateImage(t, "", "machine-id"))
	s := create(t, b, spec)
	ctx := context.Background()
	if _, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-7"); err != nil {
		t.Fatal(err)
	}
	if _, err := local.New(dir); !errors.Is(err, local.ErrStateInUse) {
		t.Fatalf("a second Backend on a held directory: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.List(ctx, sandbox.Filter{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("List on a closed Backend: %v", err)
	}

	b2 := newBackend(t, dir)
	got, err := b2.List(ctx, sandbox.Filter{Owner: "claim-7"})
	if err != nil || len(got) != 1 {
		t.Fatalf("List after restart = %v, %v", got, err)
	}
	s2 := got[0]
	if s2.ID != s.ID || s2.State != sandbox.StateRunning || s2.Pool != spec.Pool || s2.Generation != spec.Generation || s2.Ready.IsZero() {
		t.Fatalf("found %+v", s2)
	}
	if out, _, code := sh(t, s2, "echo still here"); out != "still here\n" || code != 0 {
		t.Fatalf("exec after restart: %q %d", out, code)
	}
	if id, err := s2.Identity(ctx); err != nil || id.SandboxID != s.ID {
		t.Fatalf("identity after restart: %+v %v", id, err)
	}
	if len(bwrapProcesses(t, s.ID)) == 0 {
		t.Fatal("no bwrap process for the running sandbox")
	}
	if err := b2.Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if p := bwrapProcesses(t, s.ID); len(p) != 0 {
		t.Errorf("bwrap processes left after Delete: %v", p)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sandboxes")); len(ents) != 0 {
		t.Errorf("sandboxes/ still holds %v", ents)
	}
}

// A sandbox whose processes were killed from outside is listed as dead and
// reaped.
func TestDeadSandboxIsReaped(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	spec := specFor(t, templateImage(t, "", "machine-id"))
	dead := create(t, b, spec)
	alive := create(t, b, spec)
	for _, pid := range bwrapProcesses(t, dead.ID) {
		var n int
		fmt.Sscan(pid, &n)
		_ = syscall.Kill(n, syscall.SIGKILL)
	}
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := b.List(ctx, sandbox.Filter{State: sandbox.StateDead})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0].ID == dead.ID && got[0].Runner == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead sandboxes = %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.SetOwner(ctx, dead.ID, sandbox.OwnerWarm, "claim-1"); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Errorf("SetOwner on a dead sandbox: %v", err)
	}
	ids, err := sandbox.Reap(ctx, b)
	if err != nil || len(ids) != 1 || ids[0] != dead.ID {
		t.Fatalf("Reap = %v, %v", ids, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes", dead.ID)); !os.IsNotExist(err) {
		t.Errorf("dead sandbox's directory: %v", err)
	}
	if got, _ := b.List(ctx, sandbox.Filter{}); len(got) != 1 || got[0].ID != alive.ID || got[0].State != sandbox.StateRunning {
		t.Errorf("after Reap: %v", got)
	}
}

// helperEnv makes the test binary a runtime that creates one sandbox,
// prints its id and waits to be killed.
const helperEnv = "SLIPWAY_LOCAL_TEST_RUNTIME"

func runtimeHelper() {
	var cfg struct{ Dir, Base, Runner string }
	cfg.Dir, cfg.Base, cfg.Runner = os.Getenv(helperEnv), os.Getenv(helperEnv+"_BASE"), os.Getenv(helperEnv+"_RUNNER")
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fixtures.base = cfg.Base
	rb, err := sandbox.RunnerFromFile(cfg.Runner, 1)
	if err != nil {
		fail(err)
	}
	fixtures.runner = rb
	img, err := baseImage("", "machine-id")
	if err != nil {
		fail(err)
	}
	b, err := local.New(cfg.Dir)
	if err != nil {
		fail(err)
	}
	d, _ := img.Digest()
	s, err := b.Create(context.Background(), sandbox.Spec{Pool: "p", Generation: "g-1", Template: img, TemplateID: d.String(), Runner: rb})
	if err != nil {
		fail(err)
	}
	fmt.Println(s.ID)
	select {}
}

// Killing the runtime with SIGKILL leaks no sandbox: bwrap dies with it,
// and the next Backend lists the sandbox as dead and reaps its directory.
func TestKilledRuntimeLeaksNoSandbox(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperEnv+"_BASE="+fixtures.base, helperEnv+"_RUNNER="+fixtures.runner.Path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	id := strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(id, "sb-") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("runtime helper: %q %v", line, err)
	}
	if n := len(bwrapProcesses(t, id)); n == 0 {
		t.Fatalf("the helper's sandbox %s has no bwrap process", id)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	// The kernel tears the sandbox's pid namespace down after bwrap got
	// its death signal; a process on its way out may already show no
	// command line, so wait for the state the Backend reads from
	// /proc/<pid>/stat.
	b := newBackend(t, dir)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := b.List(ctx, sandbox.Filter{})
		if err != nil || len(got) != 1 || got[0].ID != id || got[0].Pool != "p" || got[0].Generation != "g-1" {
			t.Fatalf("List after the runtime died = %+v, %v", deref(got), err)
		}
		if got[0].State == sandbox.StateDead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s outlived its runtime by 10s: %+v", id, *got[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := bwrapProcesses(t, id); len(p) > 0 {
		t.Fatalf("bwrap processes of %s outlived the runtime: %v", id, p)
	}
	if ids, err := sandbox.Reap(ctx, b); err != nil || len(ids) != 1 {
		t.Fatalf("Reap = %v %v", ids, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sandboxes")); len(ents) != 0 {
		t.Errorf("sandboxes/ still holds %v", ents)
	}
}

// A stopped runner misses heartbeats; a continued one answers again.
func TestStoppedRunnerMissesHeartbeats(t *testing.T) {
	b := newBackend(t, t.TempDir())
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	pids, err := b.Pids(s.ID)
	if err != nil || pids.Runner == 0 || pids.Init == 0 || pids.Bwrap == 0 {
		t.Fatalf("Pids = %+v, %v", pids, err)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pids.Runner)); !strings.HasSuffix(exe, "slipway-runner") {
		t.Fatalf("runner pid %d runs %q", pids.Runner, exe)
	}
	// A stop signal is asynchronous: wait until the runner is stopped, or a
	// loaded machine answers the ping below.
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = isolate.Stop(stopCtx, pids.Runner)
	stopCancel()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = s.Ping(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ping of a stopped runner: %v", err)
	}
	if err := syscall.Kill(pids.Runner, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ping(context.Background()); err != nil {
		t.Errorf("ping after SIGCONT: %v", err)
	}
}

func deref(ss []*sandbox.Sandbox) []sandbox.Sandbox {
	var out []sandbox.Sandbox
	for _, s := range ss {
		out = append(out, *s)
	}
	return out
}
