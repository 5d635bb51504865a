package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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

// detectBounds finds out what this host lets the backend enforce.
func (b *Backend) detectBounds() {
	if b.o.noCgroups {
		b.cgroups = isolate.DetectCgroups("") // CgroupNone, with the reason
	} else {
		b.cgroups = isolate.DetectCgroups(cgroupName)
	}
	b.sizedWorkspace = os.Geteuid() == 0
}

// Enforcement says which limits this backend enforces here and how.
func (b *Backend) Enforcement() sandbox.Enforcement {
	e := sandbox.Enforcement{
		Cgroup:   b.cgroups.Version(),
		Enforced: []string{sandbox.LimitOpenFiles},
		How:      map[string]string{sandbox.LimitOpenFiles: "setrlimit RLIMIT_NOFILE on every process"},
	}
	if b.o.noCgroups {
		e.Unavailable = "cgroups turned off (WithoutCgroups)"
	} else if r := b.cgroups.Reason(); r != "" {
		e.Unavailable = r
	}
	ctl := b.cgroups.Controllers()
	how := "cgroup " + b.cgroups.Version() + " "
	if slices.Contains(ctl, isolate.ControllerCPU) {
		e.Enforced = append(e.Enforced, sandbox.LimitCPU)
		e.How[sandbox.LimitCPU] = how + "cpu quota (CFS, 100ms period)"
	}
	if slices.Contains(ctl, isolate.ControllerMemory) {
		e.Enforced = append(e.Enforced, sandbox.LimitMemory)
		e.How[sandbox.LimitMemory] = how + "memory limit (swap included where counted)"
	}
	if slices.Contains(ctl, isolate.ControllerPids) {
		e.Enforced = append(e.Enforced, sandbox.LimitPids)
		e.How[sandbox.LimitPids] = how + "pids.max"
	}
	if b.sizedWorkspace {
		e.Enforced = append(e.Enforced, sandbox.LimitWorkspace)
		e.How[sandbox.LimitWorkspace] = "a tmpfs of that size as the workspace, mounted by bubblewrap in the sandbox's own mount namespace (counts against memory only through the page cache, not the sandbox's memory limit)"
	} else if e.Unavailable == "" {
		e.Unavailable = "workspace: a sized tmpfs needs the backend to run as root"
	} else {
		e.Unavailable += "; workspace: a sized tmpfs needs the backend to run as root"
	}
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
	}{{sandbox.LimitCPU, l.CPUMillis}, {sandbox.LimitMemory, l.MemoryBytes}, {sandbox.LimitPids, l.Pids}, {sandbox.LimitWorkspace, l.WorkspaceBytes}} {
		if want.v != 0 && !slices.Contains(e.Enforced, want.name) {
			errs = append(errs, fmt.Errorf("%w: Limits: %s cannot be enforced on this host (cgroup %s; %s)", sandbox.ErrInvalidSpec, want.name, e.Cgroup, e.Unavailable))
		}
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
