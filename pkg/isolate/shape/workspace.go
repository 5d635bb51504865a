package shape

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// DefaultWorkdir is the workspace inside a sandbox when the template names
// no working directory (or names /).
const DefaultWorkdir = "/workspace"

// DefaultPath is PATH when neither the template nor the caller sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Workdir is the sandbox's working directory (its workspace) for an image
// config's WorkingDir: cleaned and absolute, DefaultWorkdir for none or /.
func Workdir(workingDir string) string {
	w := path.Clean("/" + workingDir)
	if w == "/" {
		return DefaultWorkdir
	}
	return w
}

// Env is a sandbox's environment: the image's ("NAME=value"), add over
// it, and PATH and HOME (the workspace: the rest of the file system is
// read-only) when neither sets them.
func Env(image []string, workdir string, add map[string]string) isolate.Env {
	env := isolate.Env{}
	for _, kv := range image {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	for k, v := range add {
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = DefaultPath
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = workdir
	}
	return env
}

// MountPoints adds to the tree unpacked at dir what a read-only root needs
// for the mounts of a sandbox: /proc, /dev, /tmp, the workspace directory
// and /etc/machine-id (an empty file), and the caller's extra directories
// and files (paths inside the tree). Nothing is added where the tree has
// something already. Paths are resolved inside the tree (os.Root), never
// through a symlink out of it.
func MountPoints(dir, workdir string, dirs, files []string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range append([]string{"proc", "dev", "tmp", workdir}, dirs...) {
		d = strings.TrimPrefix(d, "/")
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mount point /%s: %w", d, err)
		}
	}
	for _, f := range append(files, "etc/machine-id") {
		f = strings.TrimPrefix(f, "/")
		fi, err := r.Stat(f)
		switch {
		case err == nil && fi.Mode().IsRegular():
			continue
		case err == nil:
			return fmt.Errorf("mount point /%s: %s is not a regular file", f, fi.Mode().Type())
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("mount point /%s: %w", f, err)
		}
		if err := r.MkdirAll(path.Dir(f), 0o755); err != nil {
			return fmt.Errorf("mount point /%s: %w", f, err)
		}
		fh, err := r.OpenFile(f, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
		if err != nil {
			return fmt.Errorf("mount point /%s: %w", f, err)
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return nil
}

// SeedWorkspace copies the working directory workdir of the tree at root
// (its contents, with their modes and owners) into ws, an existing empty
// directory that becomes the sandbox's private workspace. The workspace
// itself belongs to the sandbox's user (nil: root), with owner write
// permission, whoever owned the template's directory: it is the one place
// the sandbox may write.
func SeedWorkspace(root, workdir, ws string, user *isolate.User) error {
	if err := seed(root, workdir, func(sub *os.Root) error { return copyTree(sub, ws) }); err != nil {
		return err
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return err
	}
	if err := os.Chmod(ws, fi.Mode().Perm()|0o700); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil // everything is the caller's, which the sandbox runs as
	}
	uid, gid := 0, 0
	if user != nil {
		uid, gid = user.UID, user.GID
	}
	return os.Chown(ws, uid, gid)
}

// SeedWorkspaceAs seeds ws like SeedWorkspace, for a workspace whose
// every entry must belong to the writer: a tmpfs in the sandbox's user
// namespace, which maps no owner but the sandbox's user. The template's
// entries keep their modes and times but not their owners, and every
// write into ws runs inside as (see copyTreeAs), which sets the file
// system ids of the sandbox's user; the template is read outside it.
func SeedWorkspaceAs(root, workdir, ws string, as func(func() error) error) error {
	if err := seed(root, workdir, func(sub *os.Root) error { return copyTreeAs(sub, ws, false, as) }); err != nil {
		return err
	}
	return as(func() error {
		fi, err := os.Stat(ws)
		if err != nil {
			return err
		}
		return os.Chmod(ws, fi.Mode().Perm()|0o700)
	})
}

// seed opens the working directory workdir of the tree at root (inside
// it: no symlink leads out) and copies it with cp.
func seed(root, workdir string, cp func(sub *os.Root) error) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	sub, err := r.OpenRoot(strings.TrimPrefix(workdir, "/"))
	if err != nil {
		return fmt.Errorf("template workdir %s: %w", workdir, err)
	}
	defer sub.Close()
	if err := cp(sub); err != nil {
		return fmt.Errorf("seed the workspace from the template's %s: %w", workdir, err)
	}
	return nil
}

// copyTree copies the tree under src into dst (an existing directory,
// which takes src's mode and owner): directories, regular files, symlinks
// (as links, never followed) and named pipes, with modes, modification
// times and, when running as root, owners. Other entries are skipped.
func copyTree(src *os.Root, dst string) error {
	return copyTreeAs(src, dst, os.Geteuid() == 0, nil)
}

// copyTreeAs is copyTree keeping the owners only when owners is set, with
// every write into dst inside as (nil: none), which may switch the file
// system ids of the thread it runs on; src is read outside it.
func copyTreeAs(src *os.Root, dst string, owners bool, as func(func() error) error) error {
	if as == nil {
		as = func(f func() error) error { return f() }
	}
	type dirTime struct {
		path string
		mt   time.Time
	}
	var dirs []dirTime
	err := fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := src.Lstat(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(p))
		mode := fi.Mode()
		var write func() error
		switch {
		case mode.IsDir():
			if p != "." {
				write = func() error { return os.Mkdir(target, 0o700) }
			} else {
				write = func() error { return nil }
			}
			dirs = append(dirs, dirTime{target, fi.ModTime()})
		case mode.IsRegular():
			in, err := src.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer in.Close()
			write = func() error { return copyFile(in, target) }
		case mode&fs.ModeSymlink != 0:
			link, err := src.Readlink(p)
			if err != nil {
				return err
			}
			write = func() error { return os.Symlink(link, target) }
		case mode&fs.ModeNamedPipe != 0:
			write = func() error { return syscall.Mkfifo(target, 0o600) }
		default:
			return nil
		}
		return as(func() error {
			if err := write(); err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && owners {
				if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
			if mode&fs.ModeSymlink == 0 {
				if err := os.Chmod(target, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
					return err
				}
				if !mode.IsDir() {
					return os.Chtimes(target, time.Time{}, fi.ModTime())
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return as(func() error {
		for _, d := range slices.Backward(dirs) { // children first: writing into a directory changes its time
			if err := os.Chtimes(d.path, time.Time{}, d.mt); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyFile creates dst (it must not exist) holding what in holds.
func copyFile(in *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
