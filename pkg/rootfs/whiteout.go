package rootfs

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."     // aufs bookkeeping, ignored
	opaqueWhiteout = ".wh..wh..opq" // hides the lower contents of its directory
)

// whiteout applies the whiteout entry base in directory dir. As the OCI
// image spec says, a whiteout hides only what lower layers put there: a path
// the current layer wrote stays.
func (x *extractor) whiteout(dir, base string) error {
	if base != opaqueWhiteout && strings.HasPrefix(base, whiteoutMeta) {
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if base != opaqueWhiteout && (target == "" || target == "." || target == "..") {
		return unsafe("whiteout of %q refused", target)
	}
	pfd, err := x.dirs.openDir(dir, false, nil)
	if errors.Is(err, errNoParent) {
		return nil // nothing below to hide
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	x.report.Whiteouts++
	x.dirs.invalidate()
	if base == opaqueWhiteout {
		fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %q: %w", dir, err)
		}
		return x.removeUnwritten(fd, dir, nil) // what lower layers left
	}
	if x.written[path.Join(dir, target)] {
		return nil
	}
	return removeAllAt(pfd, target)
}

// removeUnwritten removes from directory fd (named dir, opened O_RDONLY,
// closed here) everything the extractor did not write (this layer, or the
// synced stream), descending into the directories it did write; removed,
// when not nil, counts the entries removed at any depth.
func (x *extractor) removeUnwritten(fd int, dir string, removed *int) error {
	return forEachName(fd, func(n string) error {
		p := path.Join(dir, n)
		if !x.written[p] {
			if removed != nil {
				*removed++
			}
			return removeAllAt(fd, n)
		}
		child, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %q: %w", p, err)
		}
		return x.removeUnwritten(child, p, removed)
	})
}

// finishDirs gives every directory its recorded mode and mtime, deepest
// first, now that no more children will be written into it.
func (x *extractor) finishDirs() error {
	names := make([]string, 0, len(x.metas))
	for n := range x.metas {
		names = append(names, n)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, n := range names {
		if err := x.finishDir(n, x.metas[n]); err != nil {
			return &EntryError{Layer: x.report.Layers - 1, Name: n, Err: err}
		}
	}
	return nil
}

func (x *extractor) finishDir(name string, m dirMeta) error {
	pfd, err := x.dirs.openDir(path.Dir(name), false, nil)
	if err != nil {
		return nil // removed (or replaced) by a later layer
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, path.Base(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer unix.Close(fd)
	// What is already so is left: a chmod or utimes, even to the same
	// value, moves the ctime, and a synced tree (SyncTar) keeps it.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat directory: %w", err)
	}
	if st.Mode&0o7777 != m.mode {
		if err := unix.Fchmod(fd, m.mode); err != nil {
			return fmt.Errorf("chmod directory: %w", err)
		}
	}
	if st.Mtim.Nano() != m.mtimeNs {
		if err := utimesAt(fd, ".", m.mtimeNs); err != nil {
			return fmt.Errorf("set directory times: %w", err)
		}
	}
	return nil
}
