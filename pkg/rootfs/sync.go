package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// SyncReport says what SyncTar did: the ExtractReport of what it wrote,
// and what it left as it was or removed.
type SyncReport struct {
	ExtractReport
	// Kept counts the entries left untouched (same inode, same ctime):
	// regular files whose bytes and metadata are the stream's, and
	// directories, symbolic links and named pipes whose metadata is.
	Kept int
	// KeptBytes is the content of the regular files kept: what SyncTar
	// read from dir to compare with the stream.
	KeptBytes int64
	// Replaced counts the regular files that were in dir with other bytes
	// or metadata, written anew (a new inode).
	Replaced int
	// Removed counts the entries of dir the stream does not name, removed
	// (a directory with everything below it counts once).
	Removed int
}

// syncState is what an extractor in sync mode (SyncTar) keeps.
type syncState struct {
	// claimed are the inodes of the regular files kept so far: a second
	// regular-file entry on the same inode is a file of its own in the
	// stream, so it is written anew, never left hardlinked.
	claimed map[[2]uint64]bool
	buf     []byte // the kept file's bytes, beside the stream's in x.buf
	report  *SyncReport
}

// SyncTar makes dir hold exactly what the uncompressed tar stream r holds,
// with ExtractTar's checks and limits (r is not trusted: no path escapes,
// no write through a symbolic link, no device node, bounded), touching
// only what differs: a regular file whose bytes, size, mode and mtime (and
// owner, when ownership is kept) are the entry's is left as it is, with
// its inode and ctime, so a Tree snapshot of dir taken before sees it
// unchanged; a file with other bytes is written anew, whatever its size
// and mtime say (a rewrite that set its mtime back is still seen); an
// entry dir holds and the stream does not name is removed. Telling a file
// unchanged costs a read of the kept file beside the stream's bytes.
//
// dir is created (0700) when absent; what is in it is the caller's own
// earlier copy of the same source. A stream is a plain tree, not a layer:
// a name beginning with ".wh." is refused (ErrUnsupported), as Diff
// refuses it. On error dir holds a partial tree: remove it.
func SyncTar(ctx context.Context, r io.Reader, dir string, opts ...ExtractOption) (*SyncReport, error) {
	o, err := newExtractOptions(opts)
	if err != nil {
		return nil, err
	}
	root, err := openSyncTarget(dir)
	if err != nil {
		return nil, err
	}
	rep := &SyncReport{}
	x := &extractor{
		opts:  o,
		dirs:  dirCache{root: root, fd: -1},
		metas: map[string]dirMeta{},
		buf:   make([]byte, 256<<10),
		sync:  &syncState{claimed: map[[2]uint64]bool{}, buf: make([]byte, 256<<10), report: rep},
	}
	defer x.close()
	fail := func(err error) (*SyncReport, error) {
		rep.ExtractReport = x.report
		return rep, err
	}
	if err := x.applyStream(ctx, 0, r, func() v1.Hash { return v1.Hash{} }); err != nil {
		return fail(err)
	}
	x.report.Layers++
	fd, err := unix.Openat(x.dirs.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", dir, err))
	}
	x.dirs.invalidate()
	// every entry the stream did not name goes, counted
	if err := x.removeUnwritten(fd, ".", &x.sync.report.Removed); err != nil {
		return fail(&EntryError{Name: "", Err: fmt.Errorf("remove what the stream no longer holds: %w", err)})
	}
	if err := x.finishDirs(); err != nil {
		return fail(err)
	}
	rep.ExtractReport = x.report
	return rep, nil
}

// openSyncTarget opens dir, created 0700 when absent, never through a
// symbolic link at its last component.
func openSyncTarget(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, fmt.Errorf("%w: %w", ErrTarget, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: open %s: %w", ErrTarget, dir, err)
	}
	return fd, nil
}

// syncEntry leaves what stands at base when it already is the entry; it
// reports whether it handled the entry (kept it, or, for a regular file
// whose bytes differ past the first read, wrote it anew). Otherwise the
// caller writes the entry as Extract does.
func (x *extractor) syncEntry(ctx context.Context, r io.Reader, hdr *tar.Header, pfd int, base, name string, mode uint32) (bool, error) {
	st, ok, err := lstatAt(pfd, base)
	if err != nil || !ok {
		return false, err
	}
	mtime := hdr.ModTime.UnixNano()
	owned := !x.opts.chown || (int(st.Uid) == hdr.Uid && int(st.Gid) == hdr.Gid)
	kind := st.Mode & unix.S_IFMT
	switch hdr.Typeflag {
	case tar.TypeDir:
		if kind != unix.S_IFDIR {
			return false, nil
		}
		x.metas[name] = dirMeta{mode: mode, mtimeNs: mtime}
		x.report.Dirs++
		if owned {
			x.sync.report.Kept++
			return true, nil
		}
		return true, x.chown(pfd, base, hdr)
	case tar.TypeSymlink:
		if kind != unix.S_IFLNK || !owned || st.Mtim.Nano() != mtime {
			return false, nil
		}
		target, err := readlinkAt(pfd, base)
		if err != nil || target != hdr.Linkname {
			return false, err
		}
	case tar.TypeFifo:
		if kind != unix.S_IFIFO || !owned || st.Mtim.Nano() != mtime || st.Mode&0o7777 != mode {
			return false, nil
		}
	case tar.TypeReg:
		if kind != unix.S_IFREG || !owned || st.Mtim.Nano() != mtime || st.Mode&0o7777 != mode || st.Size != hdr.Size ||
			x.sync.claimed[[2]uint64{st.Dev, st.Ino}] {
			return false, nil
		}
		return x.syncFile(ctx, r, hdr, pfd, base, mode, st)
	default:
		return false, nil
	}
	x.sync.report.Kept++
	return true, nil
}

// syncFile compares the kept regular file base (st) with the entry's
// bytes read from r: equal, it is left untouched; at the first difference
// it is unlinked and written anew from what matched (read back from the
// kept file, still open) and the rest of the stream.
func (x *extractor) syncFile(ctx context.Context, r io.Reader, hdr *tar.Header, pfd int, base string, mode uint32, st unix.Stat_t) (bool, error) {
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open the kept file: %w", err)
	}
	kept := os.NewFile(uintptr(fd), base)
	defer kept.Close()
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return false, fmt.Errorf("stat the kept file: %w", err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil // not what was looked at: write the entry anew
	}
	var off int64
	for off < hdr.Size {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		n := int(min(int64(len(x.buf)), hdr.Size-off))
		if _, err := io.ReadFull(r, x.buf[:n]); err != nil {
			return true, fmt.Errorf("read content: %w", err)
		}
		if _, err := io.ReadFull(kept, x.sync.buf[:n]); err != nil {
			return true, fmt.Errorf("read the kept file: %w", err)
		}
		if i := mismatch(x.buf[:n], x.sync.buf[:n]); i >= 0 {
			// Replace it: what matched comes back from the kept file (an
			// unlinked inode still reads through fd), then the rest.
			rest := copy(x.sync.buf, x.buf[i:n])
			if err := unix.Unlinkat(pfd, base, 0); err != nil {
				return true, fmt.Errorf("remove the kept file: %w", err)
			}
			src := io.MultiReader(io.NewSectionReader(kept, 0, off+int64(i)), bytes.NewReader(x.sync.buf[:rest]), r)
			if err := x.writeFile(ctx, src, hdr, pfd, base, mode); err != nil {
				return true, err
			}
			if err := utimesAt(pfd, base, hdr.ModTime.UnixNano()); err != nil {
				return true, fmt.Errorf("set times: %w", err)
			}
			x.report.Files++
			x.sync.report.Replaced++
			return true, nil
		}
		off += int64(n)
	}
	x.sync.claimed[[2]uint64{st.Dev, st.Ino}] = true
	x.report.Bytes += hdr.Size
	x.sync.report.Kept++
	x.sync.report.KeptBytes += hdr.Size
	return true, nil
}

// mismatch is the index of the first byte where a and b (of one length)
// differ, -1 when they do not.
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// syncLink leaves name when it already is a hardlink of the target's inode
// (tst) and reports whether it did.
func (x *extractor) syncLink(pfd int, base string, tst unix.Stat_t) (bool, error) {
	st, ok, err := lstatAt(pfd, base)
	if err != nil || !ok {
		return false, err
	}
	if st.Dev != tst.Dev || st.Ino != tst.Ino {
		return false, nil
	}
	x.sync.report.Kept++
	return true, nil
}

// refuseWhiteout refuses a stream entry that would read as a whiteout.
func refuseWhiteout(name string) error {
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		return fmt.Errorf("%w: name begins with %q (it would read as a whiteout)", ErrUnsupported, whiteoutPrefix)
	}
	return nil
}

// readlinkAt reads the target of symbolic link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", fmt.Errorf("read link: %w", err)
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
