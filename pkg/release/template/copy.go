package template

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Input is a file a copy step brought into the rootfs, with its digest: the
// provenance of a template names every one.
type Input struct {
	Path   string `json:"path"` // relative to the spec's folder
	Digest string `json:"digest"`
}

// copyStep copies src (relative to the spec's folder, never leaving it, not
// through a symlink that leaves it) to dst in the rootfs (never leaving it).
// A src ending in "/" copies the folder's contents into dst; otherwise a
// file is copied to dst, or into dst when dst ends in "/".
func copyStep(specDir, src, dst, rootfsDir string) ([]Input, error) {
	srcRoot, err := os.OpenRoot(specDir)
	if err != nil {
		return nil, err
	}
	defer srcRoot.Close()
	dstRoot, err := os.OpenRoot(rootfsDir)
	if err != nil {
		return nil, err
	}
	defer dstRoot.Close()

	clean := path.Clean(src)
	fi, err := srcRoot.Lstat(clean)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", src, rootErr(err))
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("copy %s: is a symlink; copy its target inside the spec's folder instead", src)
	}
	rel := strings.TrimPrefix(path.Clean(dst), "/")
	var inputs []Input
	if fi.IsDir() {
		target := rel
		if !strings.HasSuffix(src, "/") {
			target = path.Join(rel, path.Base(clean))
		}
		err = fs.WalkDir(srcRoot.FS(), clean, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return rootErr(err)
			}
			sub := strings.TrimPrefix(strings.TrimPrefix(p, clean), "/")
			out := path.Join(target, sub)
			if out == "" {
				out = "."
			}
			in, err := copyEntry(srcRoot, dstRoot, p, out, d)
			if in != nil {
				inputs = append(inputs, *in)
			}
			return err
		})
	} else {
		target := rel
		if strings.HasSuffix(dst, "/") {
			target = path.Join(rel, path.Base(clean))
		}
		if err = dstRoot.MkdirAll(path.Dir(target), 0o755); err == nil {
			var in *Input
			in, err = copyFile(srcRoot, dstRoot, clean, target, normalMode(fi.Mode()))
			if in != nil {
				inputs = append(inputs, *in)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("copy %s to %s: %w", src, dst, rootErr(err))
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].Path < inputs[j].Path })
	return inputs, nil
}

func copyEntry(srcRoot, dstRoot *os.Root, p, out string, d fs.DirEntry) (*Input, error) {
	info, err := d.Info()
	if err != nil {
		return nil, err
	}
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symlink: symlinks in a copy source are refused (they could leave the spec's folder)", p)
	case d.IsDir():
		if out == "." {
			return nil, nil
		}
		if err := dstRoot.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		return nil, dstRoot.Chmod(out, 0o755)
	case d.Type().IsRegular():
		if err := dstRoot.MkdirAll(path.Dir(out), 0o755); err != nil {
			return nil, err
		}
		return copyFile(srcRoot, dstRoot, p, out, normalMode(info.Mode()))
	default:
		return nil, fmt.Errorf("%s is a special file (%v): refused", p, d.Type())
	}
}

func copyFile(srcRoot, dstRoot *os.Root, p, out string, mode fs.FileMode) (*Input, error) {
	in, err := srcRoot.Open(p)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	// Remove first: never write through a symlink or hardlink already in the rootfs.
	if err := dstRoot.Remove(out); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := dstRoot.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dstRoot.Chmod(out, mode) // umask-free
	}
	if err != nil {
		return nil, err
	}
	return &Input{Path: p, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}, nil
}

// rootErr makes os.Root's escape errors say what happened.
func rootErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w (a path or symlink leaves its folder)", err)
	}
	return err
}

// normalMode is the mode a copied file gets: 0755 when its owner may execute
// it, else 0644, as git records it, so that a checkout's umask never changes
// a template's digest. Folders get 0755.
func normalMode(m fs.FileMode) fs.FileMode {
	if m&0o100 != 0 {
		return 0o755
	}
	return 0o644
}
