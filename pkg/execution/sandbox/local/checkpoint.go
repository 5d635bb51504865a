package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate"
)

// freezerName is the directory, under the backend process's own v1
// freezer cgroup, that holds one freezer cgroup per frozen sandbox.
const freezerName = "slipway"

func (b *Backend) theFreezer() *isolate.Freezer {
	b.freezerOnce.Do(func() { b.freezer = isolate.DetectFreezer(freezerName) })
	return b.freezer
}

// Freeze stops every process of the running sandbox id at once (the cgroup
// v1 freezer; its runner too, so it answers nothing while frozen) and
// returns the function that thaws them: a checkpoint's consistent copy.
// It fails, saying why, on a host without a writable freezer hierarchy.
func (b *Backend) Freeze(ctx context.Context, id string) (thaw func() error, err error) {
	rec, err := b.runningRecord(id)
	if err != nil {
		return nil, err
	}
	f := b.theFreezer()
	if err := f.Available(); err != nil {
		return nil, fmt.Errorf("local: freeze %s: %w", id, err)
	}
	return f.Freeze(ctx, id, func() ([]int, error) { return sandboxProcs(rec) })
}

// FreezerState reads the freezer state of sandbox id ("FROZEN",
// "THAWED", ...; "" when it was never frozen).
func (b *Backend) FreezerState(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	return b.theFreezer().State(id)
}

func (b *Backend) thawForDelete(id string) error {
	f := b.theFreezer()
	if f.Available() != nil {
		return nil
	}
	return f.Thaw(id)
}

func (b *Backend) removeFreezer(id string) error {
	f := b.theFreezer()
	if f.Available() != nil {
		return nil
	}
	return f.Remove(id)
}

// sandboxProcs lists the host pids of every process in the sandbox's pid
// namespace (its pid 1's), read from /proc.
func sandboxProcs(rec *record) ([]int, error) {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(rec.Init.Pid) + "/ns/pid")
	if err != nil {
		return nil, err
	}
	if !rec.Init.alive() {
		return nil, fmt.Errorf("%w: sandbox %s is dead", sandbox.ErrNotRunning, rec.ID)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out, nil
}

// WorkspaceDir is the running sandbox id's workspace as the host reaches
// it: its directory in the state directory, or for a bounded workspace
// (a tmpfs in the sandbox's own mount namespace) the path through its pid
// 1's root, valid while the sandbox runs. A checkpoint copies it; a
// restore writes into it after ClearWorkspace.
func (b *Backend) WorkspaceDir(ctx context.Context, id string) (string, error) {
	rec, err := b.runningRecord(id)
	if err != nil {
		return "", err
	}
	if rec.WorkspaceBytes == 0 {
		return filepath.Join(b.sandboxDir(id), "workspace"), nil
	}
	fd, err := openTmpfsInSandbox(rec, rec.Workdir)
	if err != nil {
		return "", fmt.Errorf("local: workspace of %s: %w", id, err)
	}
	_ = unix.Close(fd)
	return filepath.Join("/proc", strconv.Itoa(rec.Init.Pid), "root", rec.Workdir), nil
}

// ClearWorkspace removes everything in the running sandbox id's
// workspace (the directory stays, and its mount): a restore unpacks a
// checkpoint into the empty workspace, so files of the new template's
// seed that the checkpointed run had deleted do not come back.
func (b *Backend) ClearWorkspace(ctx context.Context, id string) error {
	dir, err := b.WorkspaceDir(ctx, id)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("local: clear workspace of %s: %w", id, err)
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("local: clear workspace of %s: %w", id, err)
	}
	return nil
}
