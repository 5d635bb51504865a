package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// seed is `slipway-runner seed SRC DST`: it copies the template's
// workspace SRC into DST, the pod's workspace emptyDir, as the running
// user (a Kubernetes init container of the template's image, as the
// sandbox's user): the emptyDir is mounted over the workspace in the
// workspace container, since the sandbox's non-root user cannot write in
// the template's own folders. Folders, regular files (their permission
// bits, without setuid, setgid or sticky) and symbolic links are copied;
// other kinds are left out and named. A file it cannot read is an error
// naming it: a pod without its template's workspace does not start. An
// absent SRC seeds nothing, and a DST that holds anything is left as it is
// (the init container of a pod whose sandbox was remade).
func seed(args []string, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: slipway-runner seed SRC DST")
	}
	src, dst := args[0], args[1]
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "no %s to seed\n", src)
		return nil
	}
	if ents, err := os.ReadDir(dst); err != nil {
		return fmt.Errorf("seed: %w", err)
	} else if len(ents) > 0 {
		// Init containers run again when the pod's sandbox is remade; the
		// emptyDir kept the workspace, and what the workload did in it.
		fmt.Fprintf(out, "%s is seeded already\n", dst)
		return nil
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		perm := info.Mode().Perm()
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, perm|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(p, to, perm); err != nil {
				return err
			}
		default:
			fmt.Fprintf(out, "left out %s: a %s\n", p, d.Type())
			return nil
		}
		n++
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed %s: %w", dst, err)
	}
	fmt.Fprintf(out, "seeded %d entries of %s\n", n, src)
	return nil
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", from, err)
	}
	if err := f.Chmod(perm); err != nil { // the umask took bits off
		f.Close()
		return err
	}
	return f.Close()
}
