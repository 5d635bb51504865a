package render

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// DirTree is a config repository checked out in a directory, as Argo CD
// hands it to a config management plugin: a Tree whose reads stay inside
// the directory (through os.Root, so a symbolic link that leads out of it
// is refused). The .git folder, if any, is not part of the tree.
type DirTree struct {
	root *os.Root
	dir  string
	// mount is the tree path the directory is ("" for the root): a pool's
	// folder checked out alone is pools/<pool>.
	mount string
}

var _ Tree = (*DirTree)(nil)

// OpenDir opens the checkout at dir. Close it when done.
func OpenDir(dir string) (*DirTree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("render: open %s: %w", dir, err)
	}
	return &DirTree{root: r, dir: dir}, nil
}

// OpenPoolDir opens dir, which holds pool poolName's folder alone (Argo
// CD streams only the common root of an Application's path and its
// manifest-generate-paths, here pools/<pool>), as that folder of a tree
// that holds nothing else: its files are read in place under
// pools/<pool>/, every other path is absent, and List names the folders
// above it. Close it when done.
func OpenPoolDir(dir, poolName string) (*DirTree, error) {
	if !pool.ValidName(poolName) {
		return nil, fmt.Errorf("render: %q is not a pool name", poolName)
	}
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	d.mount = pool.Dir(poolName)
	return d, nil
}

// Close releases the directory.
func (d *DirTree) Close() error { return d.root.Close() }

func (d *DirTree) clean(p string) (string, error) {
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("render: %s: bad path %q", d.dir, p)
	}
	return c, nil
}

// local is tree path c (clean) in the directory; ok is false for a path
// outside the folder the directory is mounted as.
func (d *DirTree) local(c string) (l string, ok bool) {
	switch {
	case d.mount == "":
		return c, true
	case c == d.mount:
		return ".", true
	}
	l, ok = strings.CutPrefix(c, d.mount+"/")
	return l, ok
}

// ReadFile returns the content of the regular file at p (slash-separated,
// relative to the directory); a path that is no file fails with an error
// matching fs.ErrNotExist, as a gitops.Tree's does.
func (d *DirTree) ReadFile(p string) ([]byte, error) {
	c, err := d.clean(p)
	if err != nil {
		return nil, err
	}
	l, ok := d.local(c)
	if !ok {
		return nil, fmt.Errorf("render: %s: %w (only %s is checked out)", c, fs.ErrNotExist, d.mount)
	}
	fi, err := d.root.Stat(l)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("render: %s: %w", c, fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("render: %s: %w", c, err)
	case fi.IsDir():
		return nil, fmt.Errorf("render: %s is a folder: %w", c, fs.ErrNotExist)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("render: %s is not a regular file", c)
	}
	b, err := d.root.ReadFile(l)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return b, nil
}

// List returns the sorted names of the files and folders directly in dir
// ("" for the root; none for a folder that does not exist).
func (d *DirTree) List(dir string) ([]string, error) {
	c, err := d.clean(dir)
	if err != nil {
		return nil, err
	}
	l, ok := d.local(c)
	if !ok {
		// A folder above the mount holds the next folder on its way.
		if rest, above := strings.CutPrefix(d.mount, c+"/"); c == "." || above {
			if c == "." {
				rest = d.mount
			}
			next, _, _ := strings.Cut(rest, "/")
			return []string{next}, nil
		}
		return []string{}, nil
	}
	f, err := d.root.Open(l)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("render: list %s: %w", c, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if l == "." && e.Name() == ".git" {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}
