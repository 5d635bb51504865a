package isolate

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Spec.Limits reach bwrap one of two ways. Normally Start sets them on
// the forked bwrap with prlimit(2) before bwrap reads its options (as it
// joins Spec.Cgroup): bwrap forks nothing until then, so every process of
// the sandbox inherits them, and no prlimit(1) process starts first (an
// exec of its own, 1-4 ms a start on this project's hosts). A caller that
// is not root cannot set another process's limits once it runs a setuid
// bwrap, so there prlimit(1) sets them and execs bwrap.

// limitsByExec reports whether limits must go through prlimit(1) for
// this bwrap: a setuid one started by a caller that is not root.
func limitsByExec(bwrap string) bool {
	if os.Geteuid() == 0 {
		return false
	}
	fi, err := os.Stat(bwrap)
	return err != nil || fi.Mode()&os.ModeSetuid != 0
}

// setLimits sets l (soft and hard alike) on process pid.
func setLimits(pid int, l Limits) error {
	for _, r := range []struct {
		name     string
		resource int
		v        uint64
	}{
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.NoFile}, {"RLIMIT_NPROC", unix.RLIMIT_NPROC, l.NProc},
		{"RLIMIT_AS", unix.RLIMIT_AS, l.AddressSpace}, {"RLIMIT_CPU", unix.RLIMIT_CPU, l.CPUSeconds},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, l.FileSize},
	} {
		if r.v == 0 {
			continue
		}
		if err := unix.Prlimit(pid, r.resource, &unix.Rlimit{Cur: r.v, Max: r.v}, nil); err != nil {
			return fmt.Errorf("set %s to %d on bwrap (pid %d): %w", r.name, r.v, pid, err)
		}
	}
	return nil
}
