package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// DiskUsage returns the bytes sandbox id's workspace keeps: the used
// blocks of its tmpfs when it has one (a pool with a workspace bound; a
// sandbox whose processes ended has none left: sandbox.ErrNotRunning),
// else the blocks allocated to the files under it, walked. Entries the
// walk cannot read (a workload may close a directory to its owner) are
// left out: the figure is then a lower bound, and partial says so.
func (b *Backend) DiskUsage(ctx context.Context, id string) (bytes int64, partial bool, err error) {
	if !validID(id) {
		return 0, false, fmt.Errorf("%w: %q", sandbox.ErrNotFound, id)
	}
	rec, err := b.readRecord(id)
	if err != nil {
		return 0, false, err
	}
	if rec.WorkspaceBytes > 0 { // its own tmpfs
		sf, err := b.workspaceStatfs(rec)
		if err != nil {
			return 0, false, fmt.Errorf("local: usage of %s: %w", id, err)
		}
		return int64(sf.Blocks-sf.Bfree) * sf.Bsize, false, nil
	}
	ws := filepath.Join(b.sandboxDir(id), "workspace")
	if _, err := os.Lstat(ws); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, fmt.Errorf("%w: %s", sandbox.ErrNotFound, id)
		}
		return 0, false, fmt.Errorf("local: usage of %s: %w", id, err)
	}
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			partial = true
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var fst unix.Stat_t
		if unix.Lstat(p, &fst) != nil {
			partial = true
			return nil
		}
		bytes += fst.Blocks * 512
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("local: usage of %s: %w", id, err)
	}
	return bytes, partial, nil
}
