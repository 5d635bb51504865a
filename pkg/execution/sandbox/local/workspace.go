package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// seedInSandbox seeds the bounded workspace of a started sandbox: the tmpfs
// bubblewrap mounted at the template's working directory, reached from the
// host through /proc/<pid>/root of the sandbox's pid 1 (resolved inside
// the sandbox's root, checked to be a tmpfs). Without a template user the
// sandbox runs as the host's root, and the seed keeps the template's
// owners, as an unbounded workspace's does; with one, the tmpfs belongs to
// the sandbox's user namespace, which maps that user alone, so every entry
// is written as that user and belongs to it.
func seedInSandbox(rec *record, t *tmpl) error {
	fd, err := openTmpfsInSandbox(rec, t.workdir)
	if err != nil {
		return fmt.Errorf("the workspace: %w", err)
	}
	defer unix.Close(fd)
	ws := "/proc/self/fd/" + strconv.Itoa(fd)
	if t.user == nil {
		return shape.SeedWorkspace(t.root, t.workdir, ws, nil)
	}
	return shape.SeedWorkspaceAs(t.root, t.workdir, ws, func(f func() error) error {
		return asFSUser(t.user.UID, t.user.GID, f)
	})
}

// workspaceStatfs reads the file system of sandbox rec's bounded
// workspace: a tmpfs mounted on the host in the sandbox's directory
// (sandboxes made before the tmpfs moved into the sandbox), else the
// tmpfs in the sandbox's own mount namespace. A sandbox whose processes
// ended has no tmpfs left: sandbox.ErrNotRunning.
func (b *Backend) workspaceStatfs(rec *record) (unix.Statfs_t, error) {
	var sf unix.Statfs_t
	dir := b.sandboxDir(rec.ID)
	ws := filepath.Join(dir, "workspace")
	var st, parent unix.Stat_t
	if unix.Lstat(ws, &st) == nil && unix.Lstat(dir, &parent) == nil && st.Dev != parent.Dev {
		return sf, unix.Statfs(ws, &sf)
	}
	if !b.alive(rec) || !rec.Init.alive() {
		return sf, fmt.Errorf("%w: sandbox %s is dead and its workspace with it", sandbox.ErrNotRunning, rec.ID)
	}
	fd, err := openTmpfsInSandbox(rec, rec.Workdir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || !rec.Init.alive() {
			return sf, fmt.Errorf("%w: sandbox %s ended: %w", sandbox.ErrNotRunning, rec.ID, err)
		}
		return sf, err
	}
	defer unix.Close(fd)
	return sf, unix.Fstatfs(fd, &sf)
}
