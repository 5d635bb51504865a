package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
