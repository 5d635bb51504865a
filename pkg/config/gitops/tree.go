package gitops

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrNotExist is returned by Tree.ReadFile for a path that is not a file.
// It matches fs.ErrNotExist too, so that readers written against package
// io/fs (pool.ReadState) take a Tree's ReadFile as it is.
var ErrNotExist = fmt.Errorf("gitops: %w", fs.ErrNotExist)

// Tree is a commit's file tree seen through pending edits. Reads see the
// edits; nothing touches a worktree. Paths are slash-separated and relative
// to the repository root.
type Tree struct {
	store   storer.EncodedObjectStorer
	base    *object.Tree // nil for an empty repository
	changes map[string]*[]byte
	// written lists the objects write stored that the base does not
	// hold: what a push of the edit must send.
	written []plumbing.Hash
}

func newTree(s storer.EncodedObjectStorer, base *object.Tree) *Tree {
	return &Tree{store: s, base: base, changes: map[string]*[]byte{}}
}

func cleanPath(p string) (string, error) {
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || c != strings.TrimPrefix(p, "/") {
		return "", fmt.Errorf("gitops: bad path %q", p)
	}
	for _, part := range strings.Split(c, "/") {
		if part == ".git" {
			return "", fmt.Errorf("gitops: bad path %q", p)
		}
	}
	return c, nil
}

// ReadFile returns the content of the file at p, with pending edits.
func (t *Tree) ReadFile(p string) ([]byte, error) {
	c, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	if b, ok := t.changes[c]; ok {
		if b == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotExist, c)
		}
		return append([]byte(nil), (*b)...), nil
	}
	if t.base == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotExist, c)
	}
	f, err := t.base.File(c)
	if err != nil {
		if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotExist, c)
		}
		return nil, fmt.Errorf("gitops: read %s: %w", c, err)
	}
	r, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("gitops: read %s: %w", c, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Exists reports whether a file exists at p, with pending edits.
func (t *Tree) Exists(p string) bool {
	_, err := t.ReadFile(p)
	return err == nil
}

// WriteFile sets the content of the file at p (a regular, non-executable
// file), creating the folders on the way.
func (t *Tree) WriteFile(p string, data []byte) error {
	c, err := cleanPath(p)
	if err != nil {
		return err
	}
	b := append([]byte(nil), data...)
	t.changes[c] = &b
	return nil
}

// Remove deletes the file at p (nothing if absent); a folder left empty
// disappears, as in git.
func (t *Tree) Remove(p string) error {
	c, err := cleanPath(p)
	if err != nil {
		return err
	}
	t.changes[c] = nil
	return nil
}

// List returns the names of the files and folders directly in folder dir
// ("" for the root), with pending edits, sorted.
func (t *Tree) List(dir string) ([]string, error) {
	names := map[string]bool{}
	prefix := ""
	if dir != "" && dir != "." {
		c, err := cleanPath(dir)
		if err != nil {
			return nil, err
		}
		prefix = c + "/"
	}
	if t.base != nil {
		sub := t.base
		if prefix != "" {
			var err error
			sub, err = t.base.Tree(strings.TrimSuffix(prefix, "/"))
			if err != nil && !errors.Is(err, object.ErrDirectoryNotFound) && !errors.Is(err, object.ErrEntryNotFound) {
				return nil, fmt.Errorf("gitops: list %s: %w", dir, err)
			}
		}
		if sub != nil {
			for _, e := range sub.Entries {
				names[e.Name] = true
			}
		}
	}
	for p, b := range t.changes {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		first, _, nested := strings.Cut(rest, "/")
		if b != nil {
			names[first] = true
		} else if !nested {
			delete(names, first)
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Changed returns the paths with pending edits, sorted.
func (t *Tree) Changed() []string {
	out := make([]string, 0, len(t.changes))
	for p := range t.changes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// write stores the edited tree and returns its hash, writing only the trees
// on the paths of changed files. changed is false when the result equals
// the base.
func (t *Tree) write() (plumbing.Hash, bool, error) {
	var baseHash plumbing.Hash
	if t.base != nil {
		baseHash = t.base.Hash
	}
	// Trees are content-addressed: an edit that rewrites files with the
	// same bytes gives the base's hash back, and no commit is made.
	h, err := t.writeDir(baseHash, "", t.changes)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if h.IsZero() {
		// Every file removed: git's empty tree.
		obj := t.store.NewEncodedObject()
		if err := (&object.Tree{}).Encode(obj); err != nil {
			return plumbing.ZeroHash, false, err
		}
		if h, err = t.store.SetEncodedObject(obj); err != nil {
			return plumbing.ZeroHash, false, err
		}
		t.written = append(t.written, h)
	}
	if t.base == nil {
		return h, h != emptyTree, nil
	}
	return h, h != baseHash, nil
}

// emptyTree is git's empty tree, the tree of a repository with no files.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// writeDir applies the changes under prefix to the tree treeHash (zero for
// a folder that does not exist yet) and returns the new tree's hash, or the
// zero hash when the folder ends up empty.
func (t *Tree) writeDir(treeHash plumbing.Hash, prefix string, changes map[string]*[]byte) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if !treeHash.IsZero() {
		tr, err := object.GetTree(t.store, treeHash)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("gitops: read tree %s: %w", prefix, err)
		}
		for _, e := range tr.Entries {
			entries[e.Name] = e
		}
	}
	// Group the changes by the first path element below prefix.
	files := map[string]*[]byte{}
	dirs := map[string]bool{}
	for p, b := range changes {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		first, _, nested := strings.Cut(rest, "/")
		if nested {
			dirs[first] = true
		} else {
			files[first] = b
		}
	}
	for name := range dirs {
		var sub plumbing.Hash
		if e, ok := entries[name]; ok {
			if e.Mode == filemode.Dir {
				sub = e.Hash
			} else if b, edited := files[name]; !edited || b != nil {
				// A file is in the way of a folder: allowed only when the
				// same edit removes the file.
				return plumbing.ZeroHash, fmt.Errorf("gitops: %s%s is a file, not a folder", prefix, name)
			}
		}
		h, err := t.writeDir(sub, prefix+name+"/", changes)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h.IsZero() {
			delete(entries, name)
		} else {
			entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		}
	}
	for name, b := range files {
		if dirs[name] {
			continue // handled above (the folder replaced or kept)
		}
		if b == nil {
			delete(entries, name)
			continue
		}
		if e, ok := entries[name]; ok && e.Mode == filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("gitops: %s%s is a folder, not a file", prefix, name)
		}
		h, err := t.writeBlob(*b)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		e, ok := entries[name]
		if !ok || e.Hash != h {
			t.written = append(t.written, h)
		}
		mode := filemode.Regular
		if ok && e.Mode == filemode.Executable {
			mode = filemode.Executable // keep the executable bit of an existing file
		}
		entries[name] = object.TreeEntry{Name: name, Mode: mode, Hash: h}
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	tr := &object.Tree{Entries: make([]object.TreeEntry, 0, len(entries))}
	for _, e := range entries {
		tr.Entries = append(tr.Entries, e)
	}
	sort.Slice(tr.Entries, func(i, j int) bool { return sortName(tr.Entries[i]) < sortName(tr.Entries[j]) })
	obj := t.store.NewEncodedObject()
	if err := tr.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitops: encode tree %s: %w", prefix, err)
	}
	if obj.Hash() == treeHash {
		return treeHash, nil // unchanged: nothing to store
	}
	h, err := t.store.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	t.written = append(t.written, h)
	return h, nil
}

// sortName is git's tree order: folders compare as if their name ended in "/".
func sortName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

func (t *Tree) writeBlob(b []byte) (plumbing.Hash, error) {
	obj := t.store.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(b)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(b); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return t.store.SetEncodedObject(obj)
}
