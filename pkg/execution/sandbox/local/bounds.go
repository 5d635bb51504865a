package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// cgroupName is the directory, under the backend process's own cgroup in
// each hierarchy, that holds one cgroup per sandbox (named by its id).
const cgroupName = "slipway"

// fullBelow is how few free bytes make a workspace full.
const fullBelow = 16 << 10

// WithoutCgroups puts sandboxes in no cgroup even where the host has
// writable ones: CPU, memory and pids limits are then not enforceable, and
// Create refuses them.
func WithoutCgroups() Option {
	return func(o *options) error {
		o.noCgroups = true
		return nil
	}
}

// detectBounds finds out what this host lets the backend enforce, by
// proof: a probe cgroup is given each limit and must read it back, and a
// probe process lowers its own RLIMIT_NOFILE (as a sandbox's runner does)
// and the kernel must read that back. A limit that did not prove itself
// is not enforced, and a pool setting it is refused (or runs without it
// where the pool accepts that).
func (b *Backend) detectBounds() {
	if b.o.noCgroups {
		b.cgroups = isolate.DetectCgroups("") // CgroupNone, with the reason
	} else {
		b.cgroups = isolate.DetectCgroups(cgroupName)
		b.provedCgroup, b.cgroupWhy = b.cgroups.ProbeCgroups(fmt.Sprintf("probe-%d-%s", os.Getpid(), newID()))
	}
	b.sizedWorkspace = os.Geteuid() == 0
	hard, err := isolate.NoFileHardLimit()
	switch {
	case err != nil:
		b.noFileWhy = fmt.Sprintf("openFiles: the runtime's own RLIMIT_NOFILE could not be read: %v", err)
	case hard < minNoFile:
		b.noFileWhy = fmt.Sprintf("openFiles: the runtime's hard RLIMIT_NOFILE is %d, under the %d a sandbox needs", hard, minNoFile)
	default:
		if err := isolate.ProbeLowerNoFile(context.Background(), minNoFile); err != nil {
			b.noFileWhy = "openFiles: " + err.Error()
		} else {
			b.noFileMax = hard
		}
	}
}

// minNoFile is the fewest open files a pool may ask for (pool.yaml's
// spec.limits.openFiles minimum), the value the start-up probe proves.
const minNoFile = 64

// Enforcement says which limits this backend enforces here and how: only
// those its start-up probes proved.
func (b *Backend) Enforcement() sandbox.Enforcement {
	e := sandbox.Enforcement{
		Cgroup: b.cgroups.Version(),
		How:    map[string]string{},
	}
	var why []string
	if b.o.noCgroups {
		why = append(why, "cgroups turned off (WithoutCgroups)")
	} else if r := b.cgroups.Reason(); r != "" {
		why = append(why, r)
	}
	if b.noFileMax > 0 {
		e.Enforced = append(e.Enforced, sandbox.LimitOpenFiles)
		e.How[sandbox.LimitOpenFiles] = fmt.Sprintf("the runner lowers its own RLIMIT_NOFILE (soft and hard) before it serves, and every command inherits it; at most %d here (the runtime's hard limit: raising it needs CAP_SYS_RESOURCE); proved at start on a probe process, read back from /proc/<runner>/limits for each run", b.noFileMax)
		e.Max = map[string]uint64{sandbox.LimitOpenFiles: b.noFileMax}
	} else {
		why = append(why, b.noFileWhy)
	}
	how := "cgroup " + b.cgroups.Version() + " "
	for _, c := range []struct{ ctl, name, how string }{
		{isolate.ControllerCPU, sandbox.LimitCPU, "cpu quota (CFS, 100ms period)"},
		{isolate.ControllerMemory, sandbox.LimitMemory, "memory limit (swap included where counted; the workspace's and /tmp's tmpfs pages count against it)"},
		{isolate.ControllerPids, sandbox.LimitPids, "pids.max"},
	} {
		switch {
		case slices.Contains(b.provedCgroup, c.ctl):
			e.Enforced = append(e.Enforced, c.name)
			e.How[c.name] = how + c.how + "; proved at start on a probe cgroup, read back from the sandbox's cgroup for each run"
		case b.cgroupWhy[c.ctl] != "":
			why = append(why, c.name+": "+b.cgroupWhy[c.ctl])
		}
	}
	if b.sizedWorkspace {
		e.Enforced = append(e.Enforced, sandbox.LimitWorkspace)
		e.WorkspaceInMemory = true
		e.How[sandbox.LimitWorkspace] = "a tmpfs of that size (at most half the memory limit, where one is set) as the workspace, mounted by bubblewrap in the sandbox's own mount namespace (its pages count against the memory limit); its size read back with statfs for each run"
	} else {
		why = append(why, "workspace: a sized tmpfs needs the backend to run as root")
	}
	e.Unavailable = strings.Join(why, "; ")
	slices.Sort(e.Enforced)
	return e
}

// checkLimits refuses a limit this host cannot enforce, naming it.
func (b *Backend) checkLimits(l sandbox.Limits) error {
	e := b.Enforcement()
	var errs []error
	for _, want := range []struct {
		name string
		v    uint64
	}{{sandbox.LimitCPU, l.CPUMillis}, {sandbox.LimitMemory, l.MemoryBytes}, {sandbox.LimitPids, l.Pids}, {sandbox.LimitOpenFiles, l.NoFile}, {sandbox.LimitWorkspace, l.WorkspaceBytes}} {
		switch {
		case want.v == 0:
		case !slices.Contains(e.Enforced, want.name):
			errs = append(errs, fmt.Errorf("%w: Limits: %s cannot be enforced on this host (cgroup %s; %s)", sandbox.ErrInvalidSpec, want.name, e.Cgroup, e.Unavailable))
		case e.Max[want.name] > 0 && want.v > e.Max[want.name]:
			errs = append(errs, fmt.Errorf("%w: Limits: %s %d is above the %d this host can apply", sandbox.ErrInvalidSpec, want.name, want.v, e.Max[want.name]))
		}
	}
	if m := sandbox.MaxWorkspace(l.MemoryBytes); m > 0 && l.WorkspaceBytes > m {
		errs = append(errs, fmt.Errorf("%w: Limits: workspace %d is over half the memory limit %d: the workspace is a tmpfs whose pages count against the memory limit", sandbox.ErrInvalidSpec, l.WorkspaceBytes, l.MemoryBytes))
	}
	return errors.Join(errs...)
}

func cgroupLimits(l sandbox.Limits) isolate.CgroupLimits {
	return isolate.CgroupLimits{CPUMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, Pids: l.Pids}
}

// unmountWorkspace detaches a sandbox directory's workspace tmpfs, if it
// has one mounted on the host: sandboxes made before the bounded workspace
// moved into the sandbox's own mount namespace have one.
func unmountWorkspace(dir string) error {
	ws := filepath.Join(dir, "workspace")
	var st, parent unix.Stat_t
	if unix.Lstat(ws, &st) != nil || unix.Lstat(dir, &parent) != nil || st.Dev == parent.Dev {
		return nil // gone, or not a mount point
	}
	if err := unix.Unmount(ws, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount the workspace %s: %w", ws, err)
	}
	return nil
}

// LimitEvents reads what sandbox id's limits did: its cgroup's OOM kills
// and refused forks, and whether its workspace is full now.
func (b *Backend) LimitEvents(ctx context.Context, id string) (sandbox.LimitEvents, error) {
	var ev sandbox.LimitEvents
	if err := b.open(); err != nil {
		return ev, err
	}
	if !validID(id) {
		return ev, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	rec, err := b.readRecord(id)
	if err != nil {
		return ev, err
	}
	if rec.Cgroup {
		ce, err := b.cgroups.OpenCgroup(id).Events()
		if err != nil {
			return ev, fmt.Errorf("local: sandbox %s: %w", id, err)
		}
		ev.OOMKills, ev.PidsRefused, ev.CPUThrottled = ce.OOMKills, ce.PidsRefused, ce.Throttled
	}
	if rec.WorkspaceBytes > 0 {
		// A sandbox that ended took its workspace with it: nothing is
		// full any more.
		fs, err := b.workspaceStatfs(rec)
		switch {
		case errors.Is(err, sandbox.ErrNotRunning):
		case err != nil:
			return ev, fmt.Errorf("local: sandbox %s: %w", id, err)
		default:
			ev.WorkspaceFull = fs.Bavail*uint64(fs.Bsize) < fullBelow
		}
	}
	return ev, nil
}

// Applied reads back from the kernel the limits sandbox id has: its
// cgroup's CPU quota, memory limit and pids.max, the runner's
// RLIMIT_NOFILE (/proc/<pid>/limits: every command inherits it), and the
// sizes of its workspace and /tmp (statfs of the file systems mounted in
// the sandbox). What the kernel does not hold is absent, whatever the
// sandbox was asked for.
func (b *Backend) Applied(ctx context.Context, id string) (sandbox.Applied, error) {
	a := sandbox.Applied{Values: map[string]uint64{}, How: map[string]string{}}
	if err := b.open(); err != nil {
		return a, err
	}
	if !validID(id) {
		return a, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	rec, err := b.readRecord(id)
	if err != nil {
		return a, err
	}
	if !b.alive(rec) || !rec.Init.alive() {
		return a, fmt.Errorf("%w: sandbox %s", sandbox.ErrNotRunning, id)
	}
	var errs []error
	if rec.Cgroup {
		got, err := b.cgroups.OpenCgroup(id).Applied()
		errs = append(errs, err)
		v := b.cgroups.Version()
		for _, c := range []struct {
			name, file string
			n          uint64
		}{
			{sandbox.LimitCPU, map[bool]string{true: "cpu.max", false: "cpu.cfs_quota_us / cpu.cfs_period_us"}[v == isolate.CgroupV2], got.CPUMillis},
			{sandbox.LimitMemory, map[bool]string{true: "memory.max", false: "memory.limit_in_bytes"}[v == isolate.CgroupV2], got.MemoryBytes},
			{sandbox.LimitPids, "pids.max", got.Pids},
		} {
			if c.n > 0 {
				a.Values[c.name], a.How[c.name] = c.n, "cgroup "+v+" "+c.file
			}
		}
	}
	if rec.Runner.alive() {
		_, hard, err := isolate.ProcNoFile(rec.Runner.Pid)
		if err == nil && rec.Runner.alive() && hard > 0 {
			a.Values[sandbox.LimitOpenFiles] = hard // the ceiling: a command may raise its soft limit up to it
			a.How[sandbox.LimitOpenFiles] = "RLIMIT_NOFILE of the runner, /proc/<pid>/limits (every command inherits it)"
		}
		errs = append(errs, err)
	}
	if rec.WorkspaceBytes > 0 {
		fs, err := b.workspaceStatfs(rec)
		if err == nil {
			a.Values[sandbox.LimitWorkspace] = fs.Blocks * uint64(fs.Bsize)
			a.How[sandbox.LimitWorkspace] = "statfs of the workspace's tmpfs"
		}
		errs = append(errs, err)
	}
	if fd, err := openTmpfsInSandbox(rec, "/tmp"); err == nil {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(fd, &fs); err == nil {
			a.Values[sandbox.LimitTmp] = fs.Blocks * uint64(fs.Bsize)
			a.How[sandbox.LimitTmp] = "statfs of /tmp's tmpfs"
		}
		unix.Close(fd)
	}
	if err := errors.Join(errs...); err != nil {
		return a, fmt.Errorf("local: sandbox %s: read back its limits: %w", id, err)
	}
	return a, nil
}
