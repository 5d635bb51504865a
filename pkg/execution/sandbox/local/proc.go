package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// procRef names a host process by pid and start time (clock ticks after
// boot, field 22 of /proc/<pid>/stat), so that a pid reused by an unrelated
// process is never taken for a sandbox's, nor signalled.
type procRef struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// refOf reads pid's start time; ok is false when pid is gone.
func refOf(pid int) (procRef, bool) {
	start, state, err := readStat(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return procRef{}, false
	}
	return procRef{Pid: pid, Start: start}, true
}

// alive reports whether the process runs (a zombie does not).
func (r procRef) alive() bool {
	if r.Pid <= 0 {
		return false
	}
	start, state, err := readStat(r.Pid)
	return err == nil && start == r.Start && state != 'Z' && state != 'X'
}

// kill sends SIGKILL to the process, or to its process group, if it is
// still the process r names.
func (r procRef) kill(group bool) error {
	if !r.alive() {
		return nil
	}
	pid := r.Pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return nil
}

// readStat is isolate's reading of /proc/<pid>/stat.
func readStat(pid int) (uint64, byte, error) { return isolate.ProcStat(pid) }

// bootID identifies this boot of the host: a recorded pid and start time
// mean nothing after a reboot.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// children lists the host pids of pid's children.
func children(pid int) []int {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// nsPid is pid's pid in its innermost pid namespace (the last NSpid field
// of /proc/<pid>/status).
func nsPid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.Atoi(f[len(f)-1])
			return n, err == nil
		}
	}
	return 0, false
}

// findInSandbox returns the host pid of the descendant of init (the
// sandbox's pid 1, a host pid) whose pid inside the sandbox is inner.
func findInSandbox(init, inner int) (int, bool) {
	queue := children(init)
	for seen := 0; len(queue) > 0 && seen < 10000; seen++ {
		p := queue[0]
		queue = queue[1:]
		if n, ok := nsPid(p); ok && n == inner {
			return p, true
		}
		queue = append(queue, children(p)...)
	}
	return 0, false
}

// waitGone polls until none of refs runs, for at most limit.
func waitGone(limit time.Duration, refs ...procRef) error {
	deadline := time.Now().Add(limit)
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		alive := false
		for _, r := range refs {
			alive = alive || r.alive()
		}
		if !alive {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox processes %v still run %s after SIGKILL", refs, limit)
		}
		time.Sleep(d)
	}
}

// removeAll removes path like os.RemoveAll, first making directories
// writable when a sandbox left some read-only (which stops a caller that
// is not root).
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}

// tailBuffer keeps the last max bytes written to it: the runner's own
// stderr, for errors when it fails to start.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return strings.TrimSpace(string(b))
}
