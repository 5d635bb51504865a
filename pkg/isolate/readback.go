package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Applied reads back from the kernel the limits the cgroup has now: the
// CPU quota (as thousandths of a core: quota/period), the memory limit
// and pids.max. A controller with no limit (the kernel's "max", or v1's
// page-rounded maximum) reads as 0.
func (g *Cgroup) Applied() (CgroupLimits, error) {
	var l CgroupLimits
	read := func(ctl, file string) (string, error) {
		dir, ok := g.dirs[ctl]
		if !ok {
			return "", nil
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return "", fmt.Errorf("%w: read back %s: %v", ErrCgroup, file, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	num := func(file, s string) (uint64, error) {
		if s == "" || s == "max" || strings.HasPrefix(s, "-") {
			return 0, nil
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: read back %s: %q", ErrCgroup, file, s)
		}
		return n, nil
	}
	var errs []error
	if g.version == CgroupV2 {
		if s, err := read(ControllerCPU, "cpu.max"); err != nil {
			errs = append(errs, err)
		} else if q, p, ok := strings.Cut(s, " "); ok && q != "max" {
			quota, err1 := num("cpu.max", q)
			period, err2 := num("cpu.max", p)
			if period > 0 {
				l.CPUMillis = quota * 1000 / period
			}
			errs = append(errs, err1, err2)
		}
		if s, err := read(ControllerMemory, "memory.max"); err != nil {
			errs = append(errs, err)
		} else {
			l.MemoryBytes, err = num("memory.max", s)
			errs = append(errs, err)
		}
	} else {
		q, err1 := read(ControllerCPU, "cpu.cfs_quota_us")
		p, err2 := read(ControllerCPU, "cpu.cfs_period_us")
		errs = append(errs, err1, err2)
		quota, err1 := num("cpu.cfs_quota_us", q)
		period, err2 := num("cpu.cfs_period_us", p)
		errs = append(errs, err1, err2)
		if period > 0 {
			l.CPUMillis = quota * 1000 / period
		}
		s, err := read(ControllerMemory, "memory.limit_in_bytes")
		errs = append(errs, err)
		if l.MemoryBytes, err = num("memory.limit_in_bytes", s); err == nil && l.MemoryBytes >= unlimitedV1 {
			l.MemoryBytes = 0
		}
		errs = append(errs, err)
	}
	s, err := read(ControllerPids, "pids.max")
	errs = append(errs, err)
	l.Pids, err = num("pids.max", s)
	errs = append(errs, err)
	return l, errors.Join(errs...)
}

// unlimitedV1 is where cgroup v1's memory.limit_in_bytes means no limit
// (the kernel writes PAGE_COUNTER_MAX pages in bytes, 2^63 rounded down
// to a page).
const unlimitedV1 = 1 << 62

// ProbeCgroups proves, on a cgroup of its own (name, made and removed),
// which of the host's controllers take a limit and give it back as set:
// it returns the controllers that did, and why each other did not.
func (c *Cgroups) ProbeCgroups(name string) (proved []string, why map[string]string) {
	why = map[string]string{}
	want := CgroupLimits{CPUMillis: 250, MemoryBytes: 64 << 20, Pids: 64}
	var asked CgroupLimits
	for _, ctl := range c.Controllers() {
		switch ctl {
		case ControllerCPU:
			asked.CPUMillis = want.CPUMillis
		case ControllerMemory:
			asked.MemoryBytes = want.MemoryBytes
		case ControllerPids:
			asked.Pids = want.Pids
		}
	}
	if asked == (CgroupLimits{}) {
		return nil, why
	}
	g, err := c.New(name, asked)
	if err != nil {
		for _, ctl := range asked.needs() {
			why[ctl] = fmt.Sprintf("a probe cgroup could not be given a limit: %v", err)
		}
		return nil, why
	}
	defer func() { _ = g.Remove() }()
	got, err := g.Applied()
	for _, ctl := range asked.needs() {
		var ok bool
		switch ctl {
		case ControllerCPU:
			ok = got.CPUMillis == asked.CPUMillis
		case ControllerMemory:
			ok = got.MemoryBytes == asked.MemoryBytes
		case ControllerPids:
			ok = got.Pids == asked.Pids
		}
		if ok {
			proved = append(proved, ctl)
		} else {
			why[ctl] = fmt.Sprintf("a probe cgroup's %s limit did not read back as set (%+v read %+v: %v)", ctl, asked, got, err)
		}
	}
	return proved, why
}

// NoFileHardLimit is this process's hard RLIMIT_NOFILE as the kernel
// reports it: the most open files a process it starts can be limited to
// without CAP_SYS_RESOURCE (a process may lower its own limits, never
// raise its hard one).
func NoFileHardLimit() (uint64, error) {
	_, hard, err := procNoFile(os.Getpid())
	return hard, err
}

// ProbeLowerNoFile proves that a process started here can lower its own
// RLIMIT_NOFILE to n, soft and hard, which is how a sandbox's runner
// applies it: prlimit(1) (util-linux) lowers its own and execs cat, which
// prints /proc/self/limits, and the kernel's line must say n and n.
func ProbeLowerNoFile(ctx context.Context, n uint64) error {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return fmt.Errorf("the probe needs prlimit (util-linux): %w", err)
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		return fmt.Errorf("the probe needs cat: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := strconv.FormatUint(n, 10)
	cmd := exec.CommandContext(ctx, prlimit, "--nofile="+v+":"+v, cat, "/proc/self/limits")
	cmd.Env = []string{}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("a probe process could not lower its RLIMIT_NOFILE to %d: %w (%s)", n, err, strings.TrimSpace(errOut.String()))
	}
	soft, hard, err := parseNoFile(out.Bytes())
	if err != nil {
		return fmt.Errorf("the probe's /proc/self/limits: %w", err)
	}
	if soft != n || hard != n {
		return fmt.Errorf("a probe process lowered its RLIMIT_NOFILE to %d but the kernel reads back %d (soft), %d (hard)", n, soft, hard)
	}
	return nil
}

// ProcNoFile reads process pid's RLIMIT_NOFILE, soft and hard, from
// /proc/<pid>/limits (0 is unlimited).
func ProcNoFile(pid int) (soft, hard uint64, err error) { return procNoFile(pid) }

func procNoFile(pid int) (soft, hard uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseNoFile(b)
}

// parseNoFile finds the "Max open files" line of a /proc/<pid>/limits.
func parseNoFile(b []byte) (soft, hard uint64, err error) {
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		lim := func(s string) (uint64, error) {
			if s == "unlimited" {
				return 0, nil
			}
			return strconv.ParseUint(s, 10, 64)
		}
		if soft, err = lim(f[0]); err == nil {
			hard, err = lim(f[1])
		}
		return soft, hard, err
	}
	return 0, 0, fmt.Errorf("no \"Max open files\" line")
}
