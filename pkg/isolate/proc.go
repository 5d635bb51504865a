package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procRef names a host process by pid and start time, so that a signal
// never reaches an unrelated process that reused the pid.
type procRef struct {
	pid   int
	start uint64 // clock ticks after boot, field 22 of /proc/<pid>/stat
}

// refOf reads pid's start time; ok is false when pid is gone.
func refOf(pid int) (procRef, bool) {
	start, state, err := readStat(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return procRef{}, false
	}
	return procRef{pid: pid, start: start}, true
}

// alive reports whether the process is still running (not a zombie).
func (r procRef) alive() bool {
	if r.pid <= 0 {
		return false
	}
	start, state, err := readStat(r.pid)
	return err == nil && start == r.start && state != 'Z' && state != 'X'
}

// signal sends sig to the process (or, with group, to its process group)
// if it is still the process r names.
func (r procRef) signal(sig syscall.Signal, group bool) error {
	if !r.alive() {
		return nil
	}
	pid := r.pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("isolate: signal %s to %d: %w", sig, pid, err)
	}
	return nil
}

// waitGone polls until the process no longer runs. When the sandbox's pid 1
// has exited, the kernel has already killed and reaped every other process
// of its pid namespace, so this bounds the whole sandbox.
func (r procRef) waitGone(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for d := time.Millisecond; r.alive(); d = min(2*d, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("isolate: sandbox process %d still runs %s after bwrap exited", r.pid, limit)
		}
		time.Sleep(d)
	}
	return nil
}

// ProcStat returns the start time (in clock ticks since boot) and the state
// letter of process pid, from /proc/<pid>/stat: with the pid, the start
// time tells a process from a later one that reuses its pid.
func ProcStat(pid int) (start uint64, state byte, err error) { return readStat(pid) }

// readStat returns the start time and state of pid from /proc/<pid>/stat.
func readStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold anything,
	// so fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("isolate: malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("isolate: malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64) // field 22
	if err != nil {
		return 0, 0, fmt.Errorf("isolate: /proc/%d/stat: %w", pid, err)
	}
	return start, f[0][0], nil
}

// Stop sends SIGSTOP to pid and returns once every thread of it is stopped.
// The signal alone is asynchronous: each thread stops when the kernel next
// schedules it, so on a loaded host the process can still answer a request
// sent just after kill(2) returned. Stop gives up with an error when ctx
// ends first or pid is gone.
func Stop(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("isolate: stop %d: %w", pid, err)
	}
	task := "/proc/" + strconv.Itoa(pid) + "/task"
	for d := time.Millisecond; ; d = min(2*d, 20*time.Millisecond) {
		tids, err := os.ReadDir(task)
		if err != nil {
			return fmt.Errorf("isolate: stop %d: %w", pid, err)
		}
		stopped := 0
		for _, tid := range tids {
			b, err := os.ReadFile(task + "/" + tid.Name() + "/stat")
			if err != nil {
				continue // the thread exited
			}
			if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
				stopped++
			}
		}
		if stopped == len(tids) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("isolate: stop %d: %d of %d threads stopped: %w", pid, stopped, len(tids), ctx.Err())
		case <-time.After(d):
		}
	}
}
