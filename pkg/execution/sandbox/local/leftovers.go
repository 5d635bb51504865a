package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Leftovers lists what is left on this machine of sandbox id after its
// deletion: its folder (workspace, root, record), a folder being removed,
// and any process whose command line names the sandbox (bubblewrap, on the
// host and as the sandbox's pid 1, and the runner all carry "--sandbox ID":
// bubblewrap's mounts, which name the folder, reach it through --args and
// are not on its command line). None for a sandbox that is really gone. A rollout's
// cleanup proof asks this.
func (b *Backend) Leftovers(ctx context.Context, id string) ([]string, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	if !validID(id) {
		return nil, fmt.Errorf("local: %q is not a sandbox id", id)
	}
	var out []string
	dir := b.sandboxDir(id)
	for _, d := range []string{dir, filepath.Join(b.dir, "sandboxes", ".deleting-"+id)} {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, "folder "+d)
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return out, err
	}
	needle := []byte("\x00--sandbox\x00" + id + "\x00")
	for _, p := range procs {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, needle) {
			continue
		}
		shown := bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})
		if len(shown) > 80 {
			shown = shown[:80]
		}
		out = append(out, fmt.Sprintf("process %d (%s)", pid, shown))
	}
	return out, nil
}

// Interrupted lists the deletions that began and did not finish (a
// sandbox's folder renamed to .deleting-<id> and not yet removed: the
// process deleting it died, or its removal failed), by sandbox id, with
// when each began (the folder's change time). A cleanup reconciler
// finishes those that stayed so for long.
func (b *Backend) Interrupted(ctx context.Context) (map[string]time.Time, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	m, err := filepath.Glob(filepath.Join(b.dir, "sandboxes", ".deleting-*"))
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, p := range m {
		id := strings.TrimPrefix(filepath.Base(p), ".deleting-")
		var st unix.Stat_t
		if !validID(id) || unix.Lstat(p, &st) != nil {
			continue
		}
		out[id] = time.Unix(st.Ctim.Unix())
	}
	return out, ctx.Err()
}

// FinishInterrupted finishes the interrupted deletion of sandbox id: its
// workspace unmounted, its cgroup and folder removed. Nothing left of it is
// not an error: it is repeat-safe.
func (b *Backend) FinishInterrupted(ctx context.Context, id string) error {
	if err := b.open(); err != nil {
		return err
	}
	if !validID(id) {
		return fmt.Errorf("local: %q is not a sandbox id", id)
	}
	p := filepath.Join(b.dir, "sandboxes", ".deleting-"+id)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unmountWorkspace(p); err != nil {
		return fmt.Errorf("local: finish deleting %s: %w", id, err)
	}
	if err := b.cgroups.OpenCgroup(id).Remove(); err != nil {
		return fmt.Errorf("local: finish deleting %s: %w", id, err)
	}
	if err := removeAll(p); err != nil {
		return fmt.Errorf("local: finish deleting %s: %w", id, err)
	}
	return ctx.Err()
}
