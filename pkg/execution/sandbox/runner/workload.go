package runner

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// WorkloadOOMScoreAdj is the oom_score_adj of every command a runner with
// a Config.Launcher starts: the most the kernel takes (1000), so that when
// a sandbox runs out of memory the OOM killer picks a command, never the
// runner. Raising one's own oom_score_adj needs no privilege; a process
// inherits it from the one that started it, so it holds for everything a
// command starts.
const WorkloadOOMScoreAdj = 1000

// LauncherArg is the first argument a Config.Launcher is run with.
const LauncherArg = "workload"

// Launch is the launcher: run as "LAUNCHER workload ARGV0 PATH ARGS...",
// it raises its own oom_score_adj to WorkloadOOMScoreAdj and execs PATH
// with ARGV0 and ARGS in its place (same pid, environment, descriptors and
// limits), so nothing of the command runs before it is the OOM killer's
// first choice. It returns only on failure.
func Launch(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: %s ARGV0 PATH [ARGS...]", LauncherArg)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(WorkloadOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("raise oom_score_adj to %d: %w", WorkloadOOMScoreAdj, err)
	}
	argv := append([]string{args[0]}, args[2:]...)
	if err := syscall.Exec(args[1], argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", args[1], err)
	}
	return nil
}

// LowerNoFile sets the calling process's RLIMIT_NOFILE, soft and hard, to
// n: the runner of a sandbox with an open-files limit does so before it
// serves, and every command it starts inherits the limit. Lowering one's
// own limits needs no privilege; asking for more than the hard limit the
// process has is refused (raising needs CAP_SYS_RESOURCE).
func LowerNoFile(n uint64) error {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err != nil {
		return fmt.Errorf("runner: read RLIMIT_NOFILE: %w", err)
	}
	if n > cur.Max {
		return fmt.Errorf("runner: open files %d is above this process's hard limit %d, and raising it needs CAP_SYS_RESOURCE", n, cur.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		return fmt.Errorf("runner: lower RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}
