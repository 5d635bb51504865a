package render

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// DirTree is a config repository checked out in a directory, as Argo CD
// hands it to a config management plugin: a Tree whose reads stay inside
// the directory (through os.Root, so a symbolic link that leads out of it
// is refused). The .git folder, if any, is not part of the tree.
type DirTree struct {
	root *os.Root
	dir  string
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

// Close releases the directory.
func (d *DirTree) Close() error { return d.root.Close() }

func (d *DirTree) clean(p string) (string, error) {
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", fmt.Errorf("render: %s: bad path %q", d.dir, p)
	}
	return c, nil
}

// ReadFile returns the content of the regular file at p (slash-separated,
// relative to the directory); a path that is no file fails with an error
// matching fs.ErrNotExist, as a gitops.Tree's does.
func (d *DirTree) ReadFile(p string) ([]byte, error) {
	c, err := d.clean(p)
	if err != nil {
		return nil, err
	}
	fi, err := d.root.Stat(c)
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
	b, err := d.root.ReadFile(c)
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
	f, err := d.root.Open(c)
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
		if c == "." && e.Name() == ".git" {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}
