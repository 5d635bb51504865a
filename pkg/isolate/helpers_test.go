package isolate_test

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// busybox is where Debian's busybox-static installs it.
const busybox = "/bin/busybox"

// applets are the busybox commands the tests use.
const applets = "cat chown echo env false grep head hostname id kill ls nc pwd sh sleep sort tail touch true unshare wc yes"

// requireSandbox fails the test when bwrap cannot run here; the Makefile's
// deps target installs bubblewrap and busybox-static.
func requireSandbox(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := isolate.Available(ctx); err != nil {
		t.Fatalf("bwrap is needed (apt-get install bubblewrap): %v", err)
	}
}

// newRootfs builds a minimal root file system from the host's static
// busybox: /bin with busybox and its applets, and empty mount points.
func newRootfs(t *testing.T) string {
	t.Helper()
	requireSandbox(t)
	f, err := elf.Open(busybox)
	if err != nil {
		t.Fatalf("a static busybox is needed (apt-get install busybox-static): %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked; install busybox-static", busybox)
		}
	}
	_ = f.Close()
	root := t.TempDir()
	for _, d := range []string{"bin", "proc", "dev", "tmp", "work", "ro", "rw", "data", "scratch"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Fields(applets) {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// baseSpec runs script with sh in a fresh rootfs.
func baseSpec(t *testing.T, script string) isolate.Spec {
	return isolate.Spec{
		Root: newRootfs(t),
		Env:  isolate.Env{"PATH": "/bin"},
		Argv: []string{"sh", "-c", script},
	}
}

// sleepArgs returns a sleep command line unique to this test run, so that
// leftover processes can be found by their command line.
func sleepArgs() (seconds string, cmdline []byte) {
	seconds = strconv.Itoa(100000 + rand.IntN(800000))
	return seconds, []byte("sleep\x00" + seconds + "\x00")
}

// procsWithCmdline lists running (not zombie) host processes whose command
// line is exactly cmdline.
func procsWithCmdline(t *testing.T, cmdline []byte) []int {
	t.Helper()
	return scanProcs(t, func(pid string) bool {
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		return err == nil && bytes.Equal(b, cmdline)
	})
}

// procsInPidNS lists running host processes in the pid namespace ns (a
// /proc/<pid>/ns/pid link target such as "pid:[4026532177]").
func procsInPidNS(t *testing.T, ns string) []int {
	t.Helper()
	return scanProcs(t, func(pid string) bool {
		l, err := os.Readlink("/proc/" + pid + "/ns/pid")
		return err == nil && l == ns
	})
}

// procsInGroup lists running host processes in process group pgid.
func procsInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	return scanProcs(t, func(pid string) bool {
		f := statFields(pid)
		return len(f) > 3 && f[3] == strconv.Itoa(pgid)
	})
}

func scanProcs(t *testing.T, match func(pid string) bool) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if f := statFields(e.Name()); len(f) > 1 && (f[1] == "Z" || f[1] == "X") {
			continue
		}
		if match(e.Name()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// statFields returns /proc/<pid>/stat from field 2 on, with the command name
// (field 2) as f[0], state as f[1], and pgrp as f[3].
func statFields(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return append([]string{s[strings.IndexByte(s, '(')+1 : i]}, strings.Fields(s[i+1:])...)
}

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func describe(res *isolate.Result) string {
	return fmt.Sprintf("exit %d signal %q timedOut %v output %q", res.ExitCode, res.Signal, res.TimedOut, res.Output)
}
