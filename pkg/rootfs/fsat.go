package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// This file holds the openat-style primitives Extract is built on. Every path
// inside the target is reached one component at a time from a descriptor of
// the target directory, with O_NOFOLLOW|O_DIRECTORY on each step, so a symlink
// (or a regular file) standing where a directory is needed is refused, never
// followed. The final component is always created with O_EXCL (or mkdirat,
// symlinkat, mknodat, linkat, which fail on an existing name) after whatever
// stood there was unlinked without following it.

// errNoParent reports that a parent directory is missing where Extract was
// told not to create it (whiteouts and hardlink targets).
var errNoParent = errors.New("parent directory does not exist")

// dirCache keeps one open directory: the parent of the previous entry, which
// is usually the parent of the next one too.
type dirCache struct {
	root int // the target directory, O_RDONLY|O_DIRECTORY
	name string
	fd   int // -1 when empty
}

func (c *dirCache) invalidate() {
	if c.fd >= 0 {
		_ = unix.Close(c.fd)
	}
	c.fd, c.name = -1, ""
}

// openDir returns a new descriptor (O_PATH) of directory name, relative to the
// root, that the caller closes. With mkdir, missing directories are created
// (mode 0700 until finishDirs) and reported to created; otherwise a missing
// one is errNoParent.
func (c *dirCache) openDir(name string, mkdir bool, created func(string)) (int, error) {
	if name == "." {
		return unix.Dup(c.root)
	}
	if c.fd >= 0 && c.name == name {
		return unix.Dup(c.fd)
	}
	fd, err := unix.Dup(c.root)
	if err != nil {
		return -1, err
	}
	walked := ""
	for _, comp := range strings.Split(name, "/") {
		walked = path.Join(walked, comp)
		next, err := openDirAt(fd, comp)
		if errors.Is(err, unix.ENOENT) {
			if !mkdir {
				_ = unix.Close(fd)
				return -1, fmt.Errorf("%w: %s", errNoParent, walked)
			}
			if err = unix.Mkdirat(fd, comp, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				created(walked)
				next, err = openDirAt(fd, comp)
			}
		}
		if err != nil {
			err = describeParent(fd, comp, walked, err)
			_ = unix.Close(fd)
			return -1, err
		}
		_ = unix.Close(fd)
		fd = next
	}
	c.invalidate()
	if dup, err := unix.Dup(fd); err == nil {
		c.fd, c.name = dup, name
	}
	return fd, nil
}

func openDirAt(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// describeParent turns the failure to open a parent component into a refusal
// that says what stood there.
func describeParent(dirfd int, comp, walked string, err error) error {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, comp, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return unsafe("parent %q is a symlink: refusing to write through it", walked)
		case unix.S_IFDIR:
		default:
			return unsafe("parent %q is not a directory", walked)
		}
	}
	return fmt.Errorf("open parent %q: %w", walked, err)
}

// lstatAt stats name in dirfd without following a symlink; ok is false when
// nothing is there.
func lstatAt(dirfd int, name string) (st unix.Stat_t, ok bool, err error) {
	err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	return st, err == nil, err
}

// removeAllAt removes name in dirfd and, for a directory, everything below
// it, never following a symlink.
func removeAllAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %q for removal: %w", name, err)
	}
	if err := forEachName(fd, func(child string) error { return removeAllAt(fd, child) }); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove directory %q: %w", name, err)
	}
	return nil
}

// forEachName calls fn for each name in the directory fd (opened O_RDONLY),
// then closes fd.
func forEachName(fd int, fn func(name string) error) error {
	f := os.NewFile(uintptr(fd), "dir")
	names, err := f.Readdirnames(-1)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("read directory: %w", err)
	}
	for _, n := range names {
		if err := fn(n); err != nil {
			_ = f.Close()
			return err
		}
	}
	return f.Close()
}

// utimesAt sets name's access and modification times to mtime without
// following a symlink.
func utimesAt(dirfd int, name string, mtimeNs int64) error {
	ts := unix.NsecToTimespec(mtimeNs)
	return unix.UtimesNanoAt(dirfd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// openTarget opens dir for extraction: it creates dir when absent and refuses
// one that is not an empty directory.
func openTarget(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: open %s: %w", ErrTarget, dir, err)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	empty := true
	err = forEachName(dup, func(string) error { empty = false; return nil })
	if err == nil && !empty {
		err = fmt.Errorf("%w: %s is not empty", ErrTarget, dir)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
