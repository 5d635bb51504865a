package runner

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Stopped is the workload's processes that StopWorkload stopped: Continue
// lets each of them go on.
type Stopped struct {
	Pids []int
}

// stopRounds bounds how often StopWorkload lists the processes again for
// ones started meanwhile; stopWait bounds how long it waits for one to
// reach the stopped state (one in an uninterruptible sleep gets there when
// its system call ends).
const (
	stopRounds = 10
	stopWait   = 10 * time.Second
)

// StopWorkload sends SIGSTOP to every process that procDir (the
// sandbox's /proc) lists, but for the caller, pid 1, those skip names (given the
// pid and the executable's path: in a pod, the runner's own processes,
// which serve the protocol, bridge connections and copy the workspace;
// see RunnerExe) and those already stopped or exited; and waits until each is stopped. It lists again until a round
// finds none new (a process forked meanwhile), at most stopRounds times.
// This is how a Kubernetes sandbox is held still for a checkpoint's copy,
// where no cgroup freezer is the runtime's: unlike the freezer, a stopped
// process's parent can see it stop and continue (SIGCHLD, WUNTRACED), and
// a process of the workload that runs the runner binary is not stopped.
// On error the processes it stopped are continued.
func StopWorkload(procDir string, skip func(pid int, exe string) bool) (*Stopped, error) {
	self := os.Getpid()
	s := &Stopped{}
	// Pid 1 is the namespace's init (in a pod, the runner serving the
	// protocol, which makes itself non-dumpable): a SIGSTOP sent to it from
	// inside its namespace is ignored.
	done := map[int]bool{self: true, 1: true}
	fail := func(err error) (*Stopped, error) {
		_ = s.Continue()
		return nil, err
	}
	for round := 1; ; round++ {
		pids, err := listPids(procDir)
		if err != nil {
			return fail(err)
		}
		var now []int
		for _, pid := range pids {
			if done[pid] {
				continue
			}
			done[pid] = true
			if exe, _ := os.Readlink(fmt.Sprintf("%s/%d/exe", procDir, pid)); skip(pid, exe) {
				continue
			}
			if st := procState(procDir, pid); st == "" || strings.ContainsAny(st, "TtZX") {
				continue // gone, stopped by someone else (not ours to continue), or a zombie
			}
			err := unix.Kill(pid, unix.SIGSTOP)
			if errors.Is(err, unix.EPERM) {
				err = stopWhenOurs(procDir, pid, skip)
			}
			if errors.Is(err, unix.ESRCH) || errors.Is(err, errSkipped) {
				continue
			} else if err != nil {
				return fail(fmt.Errorf("runner: stop pid %d: %w", pid, err))
			}
			s.Pids = append(s.Pids, pid)
			now = append(now, pid)
		}
		for _, pid := range now {
			if err := waitStopped(procDir, pid); err != nil {
				return fail(err)
			}
		}
		if len(now) == 0 {
			return s, nil
		}
		if round == stopRounds {
			return fail(fmt.Errorf("runner: processes keep starting while the workload is stopped (%d new after %d rounds)", len(now), round))
		}
	}
}

// errSkipped: the process became one StopWorkload leaves alone.
var errSkipped = errors.New("skipped")

// permWait bounds how long StopWorkload waits for a process it may not
// signal to become one it may (or one it skips).
const permWait = 2 * time.Second

// stopWhenOurs stops pid, which could not be signalled: a process another
// exec into the container is starting runs as runc's init, root and not
// dumpable, for a moment before it becomes the program exec'd (often the
// runner, which is skipped). It looks again until pid is gone, skipped or
// stopped, at most permWait; a process still not ours to signal then (of
// another user) is the EPERM returned.
func stopWhenOurs(procDir string, pid int, skip func(pid int, exe string) bool) error {
	deadline := time.Now().Add(permWait)
	for {
		time.Sleep(10 * time.Millisecond)
		if exe, _ := os.Readlink(fmt.Sprintf("%s/%d/exe", procDir, pid)); skip(pid, exe) {
			return errSkipped
		}
		if st := procState(procDir, pid); st == "" || strings.ContainsAny(st, "TtZX") {
			return errSkipped
		}
		err := unix.Kill(pid, unix.SIGSTOP)
		if !errors.Is(err, unix.EPERM) || time.Now().After(deadline) {
			return err
		}
	}
}

// RunnerExe is the skip of StopWorkload in a sandbox: the processes
// running the executable at exe (the runner's), whose path a process of
// the same user reads from /proc.
func RunnerExe(exe string) func(pid int, path string) bool {
	return func(_ int, path string) bool { return path == exe }
}

// Continue sends SIGCONT to every process StopWorkload stopped (one that
// exited meanwhile is no error).
func (s *Stopped) Continue() error {
	var errs []error
	for _, pid := range s.Pids {
		if err := unix.Kill(pid, unix.SIGCONT); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("runner: continue pid %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

// listPids lists the process ids in procDir.
func listPids(procDir string) ([]int, error) {
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return nil, fmt.Errorf("runner: list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// procState is the state letter of pid from its stat file ("" when it is
// gone).
func procState(procDir string, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", procDir, pid))
	if err != nil {
		return ""
	}
	// pid (comm) S ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// waitStopped waits until pid is stopped (or gone), at most stopWait.
func waitStopped(procDir string, pid int) error {
	deadline := time.Now().Add(stopWait)
	for {
		st := procState(procDir, pid)
		if st == "" || strings.ContainsAny(st, "TtZX") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("runner: pid %d did not stop within %s (state %s)", pid, stopWait, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
