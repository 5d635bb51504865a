package rootfs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// DiffReport says what went into a layer.
type DiffReport struct {
	Added   int // entries not in the snapshot
	Changed int // entries whose metadata or content changed
	Deleted int // whiteouts written (one per deleted subtree)
	Parents int // unchanged parent directories written so the layer is complete
	Clamped int // entries whose mtime was clamped to the epoch
	// Skipped lists paths a layer cannot carry and that were left out: sockets.
	Skipped []string

	Entries          int   // tar entries written
	UncompressedSize int64 // bytes of the tar stream
	Digest           v1.Hash
	DiffID           v1.Hash
	Size             int64 // compressed bytes (the tar's, for an uncompressed layer)

	// Tree is dir as Diff found it before it read any file: the snapshot
	// for the next Diff, as Snapshot would take it but without a second
	// walk. Taken before the content was read, it sees a file changed
	// while the layer was written as changed again next time, where a
	// Snapshot taken after would record the change as already written.
	Tree *Tree
}

// change is the reason an entry goes into the layer.
type change int

const (
	parent change = iota
	added
	changed
	deleted
)

// Diff writes the change of dir since snap as one gzip-compressed layer
// (or an uncompressed one: WithMediaType):
// added and changed entries, deleted ones as whiteouts, every parent
// directory of those, sorted by path. The bytes depend only on the tree and
// the options (see WithEpoch, WithOwner), never on the host or GOMAXPROCS.
// The layer is a *FileLayer backed by a temporary file: close it (through
// io.Closer) when done.
func Diff(ctx context.Context, snap *Tree, dir string, opts ...LayerOption) (v1.Layer, *DiffReport, error) {
	o, err := newLayerOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	if snap == nil {
		return nil, nil, fmt.Errorf("%w: nil snapshot", ErrOption)
	}
	cur, err := scan(dir)
	if err != nil {
		return nil, nil, err
	}
	plan := planDiff(snap.entries, cur)
	rep := &DiffReport{}
	w, err := newLayerWriter(o)
	if err != nil {
		return nil, nil, err
	}
	d := differ{o: o, dir: dir, cur: cur, w: w, rep: rep, links: map[[2]uint64]string{}, buf: make([]byte, 1<<20)}
	for _, p := range plan.names {
		if err := ctx.Err(); err != nil {
			w.abort()
			return nil, nil, err
		}
		if err := d.write(ctx, p, plan.why[p]); err != nil {
			w.abort()
			return nil, nil, fmt.Errorf("layer of %s: entry %q: %w", dir, p, err)
		}
	}
	l, err := w.finish(o.mediaType)
	if err != nil {
		return nil, nil, err
	}
	rep.UncompressedSize, rep.Digest, rep.DiffID, rep.Size = w.usize.n, l.digest, l.diffID, l.size
	settle(cur)
	rep.Tree = &Tree{entries: cur}
	return l, rep, nil
}

// Layer writes the whole of dir (dir itself excluded) as one layer, as Diff
// from an empty snapshot: for a base image made from a directory.
func Layer(ctx context.Context, dir string, opts ...LayerOption) (v1.Layer, *DiffReport, error) {
	return Diff(ctx, &Tree{}, dir, opts...)
}

type diffPlan struct {
	names []string // sorted
	why   map[string]change
}

// planDiff decides which paths go into the layer and why. A deleted path
// gets a whiteout only when its parent is a directory now: below a deleted or
// replaced parent, the parent's own entry covers it.
func planDiff(old, cur map[string]entry) diffPlan {
	why := map[string]change{}
	for p, e := range cur {
		if o, ok := old[p]; !ok {
			why[p] = added
		} else if !e.same(o) {
			why[p] = changed
		}
	}
	for p := range old {
		if _, ok := cur[p]; ok {
			continue
		}
		dir := path.Dir(p)
		if dir == "." || cur[dir].isDir() {
			why[path.Join(dir, whiteoutPrefix+path.Base(p))] = deleted
		}
	}
	for p := range why {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := why[dir]; ok {
				break
			}
			why[dir] = parent
		}
	}
	names := make([]string, 0, len(why))
	for p := range why {
		names = append(names, p)
	}
	sort.Strings(names)
	return diffPlan{names: names, why: why}
}

type differ struct {
	o     *layerOptions
	dir   string
	cur   map[string]entry
	w     *layerWriter
	rep   *DiffReport
	links map[[2]uint64]string // (dev, ino) of a hardlinked file -> first path written
	buf   []byte
}

// mtime is the header time of a file time: whole seconds, clamped to the
// epoch when one is set.
func (d *differ) mtime(ns int64) time.Time {
	sec := ns / int64(time.Second)
	if ns < 0 && ns%int64(time.Second) != 0 {
		sec--
	}
	t := time.Unix(sec, 0)
	if !d.o.epoch.IsZero() && t.After(d.o.epoch) {
		d.rep.Clamped++
		return d.o.epoch
	}
	return t
}

func (d *differ) write(ctx context.Context, p string, why change) error {
	if why == deleted {
		d.rep.Deleted++
		t := time.Unix(0, 0)
		if !d.o.epoch.IsZero() {
			t = d.o.epoch
		}
		return d.header(&tar.Header{Name: p, Typeflag: tar.TypeReg, ModTime: t})
	}
	if strings.HasPrefix(path.Base(p), whiteoutPrefix) {
		return fmt.Errorf("%w: name begins with %q", ErrUnsupported, whiteoutPrefix)
	}
	e := d.cur[p]
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(e.mode & 0o7777),
		Uid:     int(e.uid),
		Gid:     int(e.gid),
		ModTime: d.mtime(e.mtimeNs),
	}
	if d.o.owner != nil {
		hdr.Uid, hdr.Gid = d.o.owner[0], d.o.owner[1]
	}
	switch e.kind() {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
	case unix.S_IFLNK:
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	case unix.S_IFREG:
		return d.file(ctx, hdr, e, why)
	case unix.S_IFSOCK:
		d.rep.Skipped = append(d.rep.Skipped, p)
		return nil
	default:
		return fmt.Errorf("%w: device node", ErrUnsupported)
	}
	d.count(why)
	return d.header(hdr)
}

func (d *differ) count(why change) {
	switch why {
	case added:
		d.rep.Added++
	case changed:
		d.rep.Changed++
	case parent:
		d.rep.Parents++
	}
}

func (d *differ) header(hdr *tar.Header) error {
	d.rep.Entries++
	return d.w.tw.WriteHeader(hdr)
}

// file writes a regular file, or a hardlink to the first path of its inode
// already in the layer. It reads what it stats through one descriptor, so
// the size in the header is the size of the bytes that follow.
func (d *differ) file(ctx context.Context, hdr *tar.Header, e entry, why change) error {
	key := [2]uint64{e.dev, e.ino}
	if e.nlink > 1 {
		if first, ok := d.links[key]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			d.count(why)
			return d.header(hdr)
		}
		d.links[key] = hdr.Name
	}
	fd, err := unix.Open(filepath.Join(d.dir, filepath.FromSlash(hdr.Name)), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	f := os.NewFile(uintptr(fd), hdr.Name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != e.ino {
		return errors.New("changed while the layer was written")
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	d.count(why)
	if err := d.header(hdr); err != nil {
		return err
	}
	for left := hdr.Size; left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(d.buf[:min(int64(len(d.buf)), left)])
		if n > 0 {
			if _, werr := d.w.tw.Write(d.buf[:n]); werr != nil {
				return fmt.Errorf("write: %w", werr)
			}
			left -= int64(n)
		}
		if errors.Is(err, io.EOF) && left > 0 {
			return errors.New("file shrank while the layer was written")
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read: %w", err)
		}
	}
	return nil
}
