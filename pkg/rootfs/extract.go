package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// ExtractReport says what Extract did.
type ExtractReport struct {
	Layers    int   // layers applied
	Entries   int   // tar entries read, whiteouts included
	Files     int   // regular files written
	Dirs      int   // directories created or updated, implicit parents included
	Symlinks  int   // symlinks created
	Hardlinks int   // hardlinks created
	Fifos     int   // named pipes created
	Bytes     int64 // regular-file content written
	Whiteouts int   // whiteout and opaque-whiteout entries applied
}

// Extract unpacks img's layers, bottom first, into dir, which must be absent
// or empty. It honours whiteouts and opaque whiteouts, keeps modes (setuid,
// setgid and sticky bits included), modification times and, when running as
// root, ownership, and refuses unsafe entries with an *EntryError wrapping
// ErrUnsafeEntry or ErrLimit. On error dir holds a partial tree: remove it.
func Extract(ctx context.Context, img v1.Image, dir string, opts ...ExtractOption) (*ExtractReport, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("list layers: %w", err)
	}
	return ExtractLayers(ctx, layers, dir, opts...)
}

// ExtractLayers is Extract for a list of layers, bottom first.
func ExtractLayers(ctx context.Context, layers []v1.Layer, dir string, opts ...ExtractOption) (*ExtractReport, error) {
	x, err := newExtractor(dir, opts)
	if err != nil {
		return nil, err
	}
	defer x.close()
	for i, l := range layers {
		if err := x.applyLayer(ctx, i, l); err != nil {
			return &x.report, err
		}
		x.report.Layers++
	}
	if err := x.finishDirs(); err != nil {
		return &x.report, err
	}
	return &x.report, nil
}

// ExtractTar is Extract for one uncompressed tar stream read from r, with
// the same checks and limits (a stream that is no image's layer: one
// copied out of a sandbox, which the caller does not trust). An error
// names the entry at fault (its EntryError has a zero Digest).
func ExtractTar(ctx context.Context, r io.Reader, dir string, opts ...ExtractOption) (*ExtractReport, error) {
	x, err := newExtractor(dir, opts)
	if err != nil {
		return nil, err
	}
	defer x.close()
	if err := x.applyStream(ctx, 0, r, func() v1.Hash { return v1.Hash{} }); err != nil {
		return &x.report, err
	}
	x.report.Layers++
	if err := x.finishDirs(); err != nil {
		return &x.report, err
	}
	return &x.report, nil
}

func newExtractor(dir string, opts []ExtractOption) (*extractor, error) {
	o, err := newExtractOptions(opts)
	if err != nil {
		return nil, err
	}
	root, err := openTarget(dir)
	if err != nil {
		return nil, err
	}
	return &extractor{
		opts:  o,
		dirs:  dirCache{root: root, fd: -1},
		metas: map[string]dirMeta{},
		buf:   make([]byte, 256<<10),
	}, nil
}

// dirMeta is what a directory gets once every layer is applied: children
// written later would change its mtime, and a read-only mode would stop them
// being written at all when not root.
type dirMeta struct {
	mode    uint32
	mtimeNs int64
}

type extractor struct {
	opts    *extractOptions
	dirs    dirCache
	metas   map[string]dirMeta
	written map[string]bool // paths written by the current layer, and their parents
	buf     []byte
	report  ExtractReport
	sync    *syncState // SyncTar's, nil for Extract
}

func (x *extractor) close() {
	x.dirs.invalidate()
	_ = unix.Close(x.dirs.root)
}

func (x *extractor) applyLayer(ctx context.Context, i int, l v1.Layer) error {
	digest := func() v1.Hash {
		d, _ := l.Digest() // only on failure: it may cost a pass over the layer
		return d
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return &EntryError{Layer: i, Digest: digest(), Err: fmt.Errorf("open layer: %w", err)}
	}
	defer rc.Close()
	return x.applyStream(ctx, i, rc, digest)
}

// applyStream applies the uncompressed tar stream rc as layer i; digest
// names the layer in an error (a zero hash for a stream that is no layer).
func (x *extractor) applyStream(ctx context.Context, i int, rc io.Reader, digest func() v1.Hash) error {
	fail := func(name string, err error) error {
		return &EntryError{Layer: i, Digest: digest(), Name: name, Err: err}
	}
	x.written = map[string]bool{}
	tr := tar.NewReader(rc)
	prev := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(prev, fmt.Errorf("read tar after the entry named: %w", err))
		}
		prev = hdr.Name
		x.report.Entries++
		if x.report.Entries > x.opts.maxEntries {
			return fail(hdr.Name, fmt.Errorf("%w: more than %d entries (max entries)", ErrLimit, x.opts.maxEntries))
		}
		if err := x.apply(ctx, tr, hdr); err != nil {
			return fail(hdr.Name, err)
		}
	}
	// Read what follows the end-of-archive marker so that a verifying reader
	// (remote layers check their digest at EOF) sees the whole stream; it is
	// bounded by what is left of the byte limit.
	left := x.opts.maxBytes - x.report.Bytes
	n, err := io.CopyN(io.Discard, rc, left+1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fail(prev, fmt.Errorf("read layer: %w", err))
	}
	if n > left {
		return fail(prev, fmt.Errorf("%w: data after the archive exceeds %d bytes (max bytes)", ErrLimit, x.opts.maxBytes))
	}
	return nil
}

// cleanName validates a name from the tar stream and returns it cleaned and
// relative ("." for the root).
func (x *extractor) cleanName(name, what string) (string, error) {
	switch {
	case len(name) > x.opts.maxName:
		return "", fmt.Errorf("%w: %s of %d bytes exceeds %d (max name length)", ErrLimit, what, len(name), x.opts.maxName)
	case name == "":
		return "", unsafe("empty %s", what)
	case strings.IndexByte(name, 0) >= 0:
		return "", unsafe("NUL byte in %s", what)
	case strings.HasPrefix(name, "/"):
		return "", unsafe("absolute %s %q", what, name)
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == ".." {
			return "", unsafe("%s %q has a \"..\" component", what, name)
		}
	}
	return path.Clean(name), nil
}

func (x *extractor) apply(ctx context.Context, tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := x.cleanName(hdr.Name, "name")
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return unsafe("the root may only be a directory")
		}
		return nil // the target's own mode and owner are the caller's
	}
	if x.sync != nil {
		if err := refuseWhiteout(name); err != nil {
			return err
		}
	}
	if base := path.Base(name); strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(path.Dir(name), base)
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	case tar.TypeChar, tar.TypeBlock:
		return unsafe("device node (type %q) refused", hdr.Typeflag)
	default:
		return unsafe("unsupported entry type %q", hdr.Typeflag)
	}
	pfd, err := x.dirs.openDir(path.Dir(name), true, x.implicitDir)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	base := path.Base(name)
	if hdr.Typeflag == tar.TypeLink {
		// Validate the target before removing anything at name.
		if err := x.hardlink(pfd, name, hdr.Linkname); err != nil {
			return err
		}
	} else if err := x.makeEntry(ctx, tr, hdr, pfd, base, name); err != nil {
		return err
	}
	x.markWritten(name)
	return nil
}

// implicitDir records a parent that no entry named, created as root:root 0755.
func (x *extractor) implicitDir(name string) {
	x.metas[name] = dirMeta{mode: 0o755}
	x.report.Dirs++
}

func (x *extractor) markWritten(name string) {
	for name != "." && !x.written[name] {
		x.written[name] = true
		name = path.Dir(name)
	}
}

// clearExisting removes what stands at base unless both it and the new entry
// are directories (then the directory is kept and takes the new metadata).
// It reports whether a directory was kept.
func (x *extractor) clearExisting(pfd int, base string, dir bool) (bool, error) {
	st, ok, err := lstatAt(pfd, base)
	if err != nil || !ok {
		return false, err
	}
	if dir && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return true, nil
	}
	x.dirs.invalidate()
	return false, removeAllAt(pfd, base)
}

func (x *extractor) makeEntry(ctx context.Context, tr *tar.Reader, hdr *tar.Header, pfd int, base, name string) error {
	if hdr.Typeflag == tar.TypeReg && hdr.Size > x.opts.maxBytes-x.report.Bytes {
		return fmt.Errorf("%w: %d bytes declared, %d of %d left (max bytes)", ErrLimit, hdr.Size, x.opts.maxBytes-x.report.Bytes, x.opts.maxBytes)
	}
	if hdr.Typeflag == tar.TypeSymlink && len(hdr.Linkname) > x.opts.maxName {
		return fmt.Errorf("%w: link target of %d bytes exceeds %d (max name length)", ErrLimit, len(hdr.Linkname), x.opts.maxName)
	}
	mode := uint32(hdr.Mode) & 0o7777
	if x.sync != nil {
		if done, err := x.syncEntry(ctx, tr, hdr, pfd, base, name, mode); err != nil || done {
			return err
		}
	}
	kept, err := x.clearExisting(pfd, base, hdr.Typeflag == tar.TypeDir)
	if err != nil {
		return err
	}
	mtime := hdr.ModTime.UnixNano()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !kept {
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
				return fmt.Errorf("mkdir: %w", err)
			}
		}
		x.metas[name] = dirMeta{mode: mode, mtimeNs: mtime}
		x.report.Dirs++
		return x.chown(pfd, base, hdr)
	case tar.TypeReg:
		if err := x.writeFile(ctx, tr, hdr, pfd, base, mode); err != nil {
			return err
		}
		x.report.Files++
	case tar.TypeSymlink:
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		if err := x.chown(pfd, base, hdr); err != nil {
			return err
		}
		x.report.Symlinks++
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
		if err := x.chown(pfd, base, hdr); err != nil {
			return err
		}
		if err := unix.Fchmodat(pfd, base, mode, 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
		x.report.Fifos++
	}
	if err := utimesAt(pfd, base, mtime); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func (x *extractor) chown(pfd int, base string, hdr *tar.Header) error {
	if !x.opts.chown {
		return nil
	}
	if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %d:%d: %w", hdr.Uid, hdr.Gid, err)
	}
	return nil
}

// writeFile creates base exclusively, never through a symlink, and copies
// the entry's content; ownership goes before the mode, since chown clears
// the setuid and setgid bits.
func (x *extractor) writeFile(ctx context.Context, r io.Reader, hdr *tar.Header, pfd int, base string, mode uint32) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer unix.Close(fd)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := r.Read(x.buf)
		for off := 0; off < n; {
			w, err := unix.Write(fd, x.buf[off:n])
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
			off += w
		}
		x.report.Bytes += int64(n)
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read content: %w", rerr)
		}
	}
	if x.opts.chown {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("chown %d:%d: %w", hdr.Uid, hdr.Gid, err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return nil
}

// hardlink links base to target, an existing regular file reached without
// following a symlink.
func (x *extractor) hardlink(pfd int, name, linkname string) error {
	target, err := x.cleanName(linkname, "hardlink target")
	if err != nil {
		return err
	}
	if target == "." || target == name {
		return unsafe("hardlink to %q refused", linkname)
	}
	base := path.Base(name)
	tfd, err := x.dirs.openDir(path.Dir(target), false, nil)
	if errors.Is(err, errNoParent) {
		return unsafe("hardlink target %q does not exist", linkname)
	}
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", linkname, err)
	}
	defer unix.Close(tfd)
	tbase := path.Base(target)
	st, ok, err := lstatAt(tfd, tbase)
	switch {
	case err != nil:
		return fmt.Errorf("hardlink target %q: %w", linkname, err)
	case !ok:
		return unsafe("hardlink target %q does not exist", linkname)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return unsafe("hardlink target %q is not a regular file", linkname)
	}
	if x.sync != nil {
		if done, err := x.syncLink(pfd, base, st); err != nil || done {
			return err
		}
	}
	if _, err := x.clearExisting(pfd, base, false); err != nil {
		return err
	}
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		return fmt.Errorf("link to %q: %w", linkname, err)
	}
	x.report.Hardlinks++
	return nil
}
