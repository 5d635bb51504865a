package runner_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/testharness/need"
)

// A workspace goes out as a tar stream and comes back: files, modes,
// folders and symbolic links as they were (a link not followed), a named
// pipe left out and named, and what the target workspace held before is
// gone.
func TestWorkspaceTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "a", "b", "f.txt"), "hello\n", 0o640)
	mustWrite(t, filepath.Join(src, "x.sh"), "#!/bin/sh\n", 0o755)
	// a folder with setgid (an fsGroup's emptyDir) and a file with setuid
	if err := os.Chmod(filepath.Join(src, "a"), 0o755|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "x.sh"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var left []string
	n, err := runner.WriteWorkspaceTar(src, &buf, func(name, why string) { left = append(left, name+": "+why) })
	if err != nil || n != 5 {
		t.Fatalf("tar: %d entries, %v", n, err)
	}
	if len(left) != 1 || !strings.HasPrefix(left[0], "pipe: ") {
		t.Fatalf("left out %q, want the pipe", left)
	}
	dst := t.TempDir()
	mustWrite(t, filepath.Join(dst, "old", "stale"), "x", 0o644)
	rep, err := runner.RestoreWorkspace(dst, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed != 1 || rep.Files != 2 || rep.Dirs != 2 || rep.Symlinks != 1 || rep.Bytes != int64(len("hello\n#!/bin/sh\n")) {
		t.Fatalf("report %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a", "b", "f.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("a/b/f.txt: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "x.sh")); err != nil || fi.Mode()&^os.ModeType != 0o755 {
		t.Fatalf("x.sh: %v %v, want 0755 without setuid", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a")); err != nil || fi.Mode()&^os.ModeType != 0o755|os.ModeSetgid {
		t.Fatalf("a: %v %v, want 0755 with setgid", fi.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "out")); err != nil || l != "/etc/passwd" {
		t.Fatalf("out: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("what the workspace held before is still there: %v", err)
	}
	a, _ := os.Stat(filepath.Join(src, "a", "b", "f.txt"))
	b, _ := os.Stat(filepath.Join(dst, "a", "b", "f.txt"))
	if !a.ModTime().Equal(b.ModTime()) {
		t.Fatalf("modification time %s, want %s", b.ModTime(), a.ModTime())
	}
}

// A restore refuses what could reach outside the workspace or make a
// device, naming the entry, and writes nothing beside the workspace.
func TestRestoreWorkspaceRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hdrs  []*tar.Header
		entry string
	}{
		{"dot-dot", []*tar.Header{reg("../escape")}, "../escape"},
		{"absolute", []*tar.Header{reg("/tmp/escape")}, "/tmp/escape"},
		{"through a symlink", []*tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ".."}, reg("l/escape")}, "l/escape"},
		{"device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}}, "dev"},
		{"hard link", []*tar.Header{reg("f"), {Name: "h", Typeflag: tar.TypeLink, Linkname: "f"}}, "h"},
		{"twice", []*tar.Header{reg("f"), reg("f")}, "f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			ws := filepath.Join(parent, "workspace")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range tc.hdrs {
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
				if h.Size > 0 {
					_, _ = tw.Write(make([]byte, h.Size))
				}
			}
			_ = tw.Close()
			_, err := runner.RestoreWorkspace(ws, &buf)
			if !errors.Is(err, runner.ErrWorkspace) || !strings.Contains(err.Error(), "\""+tc.entry+"\"") {
				t.Fatalf("err = %v, want ErrWorkspace naming %q", err, tc.entry)
			}
			ents, _ := os.ReadDir(parent)
			if len(ents) != 1 {
				t.Fatalf("written beside the workspace: %v", ents)
			}
			if _, err := os.Lstat("/tmp/escape"); err == nil {
				t.Fatal("/tmp/escape was written")
			}
		})
	}
}

// StopWorkload stops a process and waits until it is stopped; Continue
// lets it go on. (The test names the one process it may stop: on the
// host, /proc lists every process of the machine.)
func TestStopWorkload(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	child := cmd.Process.Pid
	var saw []int
	s, err := runner.StopWorkload("/proc", func(pid int, exe string) bool {
		if pid == child {
			saw = append(saw, pid)
			return !strings.HasSuffix(exe, "sleep")
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pids) != 1 || s.Pids[0] != child || len(saw) != 1 {
		t.Fatalf("stopped %v (seen %v), want [%d]", s.Pids, saw, child)
	}
	if st := stateOf(t, child); st != "T" {
		t.Fatalf("state %q after StopWorkload, want T", st)
	}
	if err := s.Continue(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); stateOf(t, child) == "T"; {
		if time.Now().After(deadline) {
			t.Fatal("still stopped after Continue")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stateOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return string(b[i+2])
}

func reg(name string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}
}

func mustWrite(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// A process StopWorkload may not signal (another user's: caused for real,
// the test binary run again as nobody beside a root sleep) is looked at
// again for a while, in case it is an exec's init becoming the program
// (runc's init is root for a moment), then reported by pid with EPERM;
// nothing is left stopped.
func TestStopWorkloadNotOurs(t *testing.T) {
	if target := os.Getenv("STOP_NOT_OURS_PID"); target != "" {
		pid, _ := strconv.Atoi(target)
		_, err := runner.StopWorkload("/proc", func(p int, _ string) bool { return p != pid })
		fmt.Println("result:", err)
		return
	}
	need.Root(t, "to run a process as another user")
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	// the test binary where nobody may run it
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "stop-not-ours-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "runner.test")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestStopWorkloadNotOurs$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("STOP_NOT_OURS_PID=%d", sleep.Process.Pid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	want := fmt.Sprintf("result: runner: stop pid %d: operation not permitted", sleep.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Fatalf("as nobody: %s\nwant %q", out, want)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s, want a look again for 2 s", took)
	}
	if st := stateOf(t, sleep.Process.Pid); st == "T" {
		t.Error("the sleep is left stopped")
	}
}
