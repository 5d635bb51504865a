package rootfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Tree is the recorded metadata of every entry below a directory, taken by
// Snapshot so that Diff can later tell what changed. It holds no file
// content. (The function has the name Snapshot, so the type cannot.)
//
// A regular file counts as unchanged only when its inode, size, mode, owner,
// mtime and ctime are all the same. The ctime is the one the kernel sets on
// every content or metadata change and that no unprivileged call can set
// back, so a step that rewrites a file with the same size and then restores
// its mtime (os.Chtimes) is still caught: the restore itself moves the ctime.
// A content hash would cost a full read of the tree at Snapshot and again at
// Diff; the ctime costs nothing.
//
// The one gap of timestamps is a change in the same clock tick as the ctime
// recorded: file timestamps come from a coarse clock (a few milliseconds) or,
// on some filesystems, whole seconds. Snapshot closes it the way git handles
// "racily clean" files, by not returning until the clock has moved past the
// newest ctime it recorded by more than that granularity (a few milliseconds
// at most on a nanosecond filesystem, about a second on a coarse one), so any
// later change carries a later ctime.
//
// Snapshot assumes the tree is not changed while it runs, is on a local
// filesystem (file times from the same clock as this process), and that the
// system clock is not stepped back between Snapshot and Diff.
type Tree struct {
	entries map[string]entry
}

// Len is the number of entries recorded, the root excluded.
func (t *Tree) Len() int { return len(t.entries) }

// entry is one lstat of a path below the root.
type entry struct {
	mode    uint32 // st_mode: type and permission bits
	uid     uint32
	gid     uint32
	nlink   uint64
	dev     uint64
	ino     uint64
	size    int64
	mtimeNs int64
	ctimeNs int64
	link    string // symlink target
}

func (e entry) kind() uint32 { return e.mode & unix.S_IFMT }
func (e entry) isDir() bool  { return e.kind() == unix.S_IFDIR }

// same reports whether the entry looks untouched since old was recorded.
func (e entry) same(old entry) bool {
	return e.mode == old.mode && e.uid == old.uid && e.gid == old.gid &&
		e.dev == old.dev && e.ino == old.ino && e.size == old.size &&
		e.mtimeNs == old.mtimeNs && e.ctimeNs == old.ctimeNs && e.link == old.link
}

// Snapshot records the entries below dir (dir itself excluded) for a later
// Diff. It does not descend into directories on another filesystem (mount
// points). See Tree for how changes are detected.
func Snapshot(dir string) (*Tree, error) {
	entries, err := scan(dir)
	if err != nil {
		return nil, err
	}
	settle(entries)
	return &Tree{entries: entries}, nil
}

// scan lstats every entry below dir, keyed by slash-separated relative path.
func scan(dir string) (map[string]entry, error) {
	rootInfo, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	if !rootInfo.IsDir() {
		return nil, fmt.Errorf("scan %s: not a directory", dir)
	}
	rootDev := rootInfo.Sys().(*syscall.Stat_t).Dev
	entries := map[string]entry{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		e := entry{
			mode: st.Mode, uid: st.Uid, gid: st.Gid, nlink: uint64(st.Nlink),
			dev: st.Dev, ino: st.Ino, size: st.Size,
			mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano(),
		}
		if e.kind() == unix.S_IFLNK {
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		entries[filepath.ToSlash(rel)] = e
		if e.isDir() && st.Dev != rootDev {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	return entries, nil
}

// settle waits until a change made from now on gets a ctime later than any
// recorded: past the newest ctime by the coarse clock's resolution, and by a
// further second when no recorded ctime has a sub-second part (a filesystem
// keeping whole seconds).
func settle(entries map[string]entry) {
	var newest int64
	subSecond := false
	for _, e := range entries {
		newest = max(newest, e.ctimeNs)
		subSecond = subSecond || e.ctimeNs%int64(time.Second) != 0
	}
	if newest == 0 {
		return
	}
	gran := 10 * time.Millisecond
	var res unix.Timespec
	if unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &res) == nil {
		gran = time.Duration(res.Nano())
	}
	if !subSecond {
		gran += time.Second
	}
	deadline := time.Unix(0, newest).Add(gran)
	for now := time.Now(); !now.After(deadline); now = time.Now() {
		time.Sleep(deadline.Sub(now) + time.Microsecond)
	}
}
