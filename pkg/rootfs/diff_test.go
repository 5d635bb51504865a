package rootfs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// clamp is what a layer does to a time under WithEpoch(epoch).
func clamp(t time.Time) time.Time {
	t = t.Truncate(time.Second)
	if t.After(epoch) {
		return epoch
	}
	return t
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRoundTrip extracts a base, changes it, diffs it, applies the diff over
// the base in a fresh directory and expects the changed tree.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	old := time.Date(2015, 5, 5, 5, 5, 5, 0, time.UTC)
	base := imageOf(t, layerOf(t,
		dir("etc/"), ent{name: "etc/conf", typ: tar.TypeReg, mode: 0o644, body: "value=1", mtime: old},
		file("etc/gone", "bye"), file("etc/mode", "m"),
		dir("usr/"), dir("usr/lib/"), file("usr/lib/a", "a"), file("usr/lib/b", "b"),
		file("tofile", "f"), dir("todir/"), file("todir/inner", "i"),
		symlink("link", "etc/conf"), file("shared", "s"),
	))
	work := t.TempDir()
	_, err := rootfs.Extract(ctx, base, work)
	must(t, err)
	snap, err := rootfs.Snapshot(work)
	must(t, err)

	p := func(s string) string { return filepath.Join(work, s) }
	// Same size, mtime put back: only the ctime tells.
	must(t, os.WriteFile(p("etc/conf"), []byte("value=2"), 0o644))
	must(t, os.Chtimes(p("etc/conf"), old, old))
	must(t, os.Remove(p("etc/gone")))
	must(t, os.Chmod(p("etc/mode"), 0o4711))
	must(t, os.RemoveAll(p("usr/lib")))
	must(t, os.MkdirAll(p("new/deep"), 0o750))
	must(t, os.WriteFile(p("new/deep/file"), []byte("new"), 0o600))
	must(t, os.Remove(p("tofile")))
	must(t, os.Mkdir(p("tofile"), 0o700))
	must(t, os.RemoveAll(p("todir")))
	must(t, os.WriteFile(p("todir"), []byte("now a file"), 0o644))
	must(t, os.Remove(p("link")))
	must(t, os.Symlink("/elsewhere", p("link")))
	must(t, os.Link(p("shared"), p("etc/shared-too")))
	must(t, os.WriteFile(p("etc/.hidden"), nil, 0o644))

	layer, rep, err := rootfs.Diff(ctx, snap, work, rootfs.WithEpoch(epoch))
	must(t, err)
	defer layer.(io.Closer).Close()
	if rep.Deleted != 2 || rep.Added == 0 || rep.Changed == 0 {
		t.Errorf("report %+v: want 2 deletions (etc/gone, usr/lib), additions and changes", rep)
	}

	img, err := mutate.AppendLayers(base, layer)
	must(t, err)
	fresh := t.TempDir()
	_, err = rootfs.Extract(ctx, img, fresh)
	must(t, err)
	if d := diffDescriptions(describe(t, work, clamp), describe(t, fresh, clamp)); d != "" {
		t.Errorf("base + diff differs from the changed tree:\n%s", d)
	}

	// Nothing changed since: an empty layer.
	snap2, err := rootfs.Snapshot(fresh)
	must(t, err)
	empty, rep2, err := rootfs.Diff(ctx, snap2, fresh)
	must(t, err)
	defer empty.(io.Closer).Close()
	if rep2.Entries != 0 {
		t.Errorf("unchanged tree gave %d entries: %+v", rep2.Entries, tarHeaders(t, empty))
	}
}

// TestLayerHeaders checks sorted entries, clamped times and no host noise.
func TestLayerHeaders(t *testing.T) {
	src := t.TempDir()
	p := func(s string) string { return filepath.Join(src, s) }
	must(t, os.MkdirAll(p("b/c"), 0o755))
	must(t, os.WriteFile(p("b/c/new"), []byte("n"), 0o644))
	must(t, os.WriteFile(p("a-old"), []byte("o"), 0o644))
	old := time.Date(2010, 1, 1, 0, 0, 0, 500, time.UTC)
	must(t, os.Chtimes(p("a-old"), old, old))
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, os.Chtimes(p("b/c/new"), future, future))
	must(t, os.Link(p("a-old"), p("b/link")))
	l, rep, err := rootfs.Layer(context.Background(), src, rootfs.WithEpoch(epoch), rootfs.WithOwner(0, 0))
	must(t, err)
	defer l.(io.Closer).Close()
	var got []string
	for _, h := range tarHeaders(t, l) {
		got = append(got, h.Name)
		if h.Format != tar.FormatUSTAR || len(h.PAXRecords) != 0 || h.Uname != "" || h.Gname != "" ||
			!h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: host noise in header %+v", h.Name, h)
		}
		want := epoch
		if h.Name == "a-old" || h.Name == "b/link" {
			want = old.Truncate(time.Second)
		}
		if !h.ModTime.Equal(want) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, want)
		}
		if h.Name == "b/link" && (h.Typeflag != tar.TypeLink || h.Linkname != "a-old") {
			t.Errorf("b/link: type %q -> %q, want a hardlink to a-old", h.Typeflag, h.Linkname)
		}
	}
	want := []string{"a-old", "b/", "b/c/", "b/c/new", "b/link"}
	if !equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	if rep.Clamped != 3 || rep.Added != 5 {
		t.Errorf("report %+v: want 3 clamped, 5 added", rep)
	}
	d, _ := l.Digest()
	if d != rep.Digest {
		t.Errorf("digest %v, report says %v", d, rep.Digest)
	}
}

func TestDiffRefusesAndSkips(t *testing.T) {
	src := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(src, "sock"))
	must(t, err)
	defer ln.Close()
	l, rep, err := rootfs.Layer(context.Background(), src)
	must(t, err)
	must(t, l.(io.Closer).Close())
	if len(rep.Skipped) != 1 || rep.Skipped[0] != "sock" || rep.Entries != 0 {
		t.Errorf("report %+v: want the socket skipped", rep)
	}
	must(t, os.WriteFile(filepath.Join(src, ".wh.x"), nil, 0o644))
	if _, _, err := rootfs.Layer(context.Background(), src); !errors.Is(err, rootfs.ErrUnsupported) {
		t.Errorf("err = %v, want ErrUnsupported for a .wh. name", err)
	}
	tmp := t.TempDir()
	if _, _, err := rootfs.Layer(context.Background(), src, rootfs.WithTempDir(tmp)); err == nil {
		t.Fatal("want an error")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("a failed layer left %d files in the temp dir", len(left))
	}
}

func TestFileLayerClose(t *testing.T) {
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	tmp := t.TempDir()
	l, _, err := rootfs.Layer(context.Background(), src, rootfs.WithTempDir(tmp))
	must(t, err)
	fl := l.(*rootfs.FileLayer)
	if filepath.Dir(fl.Path()) != tmp {
		t.Errorf("layer file %s not in %s", fl.Path(), tmp)
	}
	must(t, fl.Close())
	must(t, fl.Close())
	if _, err := os.Stat(fl.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("layer file still there after Close: %v", err)
	}
	if _, err := l.Compressed(); err == nil {
		t.Error("Compressed after Close: want an error")
	}
}

// An uncompressed layer is the same tar as the gzip one, stored as it is:
// one sha256 for its digest and diff id, the file's own bytes and size;
// it extracts to the tree, and its report's Tree is the snapshot for the
// next Diff.
func TestUncompressedLayer(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	p := func(s string) string { return filepath.Join(src, s) }
	must(t, os.MkdirAll(p("a/b"), 0o755))
	must(t, os.WriteFile(p("a/b/f"), []byte("content of f"), 0o644))
	must(t, os.WriteFile(p("big"), bytes.Repeat([]byte("0123456789abcdef"), 1<<16), 0o600))
	must(t, os.Link(p("big"), p("a/big-too")))
	must(t, os.Symlink("a/b/f", p("link")))

	tmp := t.TempDir()
	l, rep, err := rootfs.Layer(ctx, src, rootfs.WithEpoch(epoch), rootfs.WithTempDir(tmp), rootfs.WithMediaType(types.OCIUncompressedLayer))
	must(t, err)
	defer l.(io.Closer).Close()
	gz, gzRep, err := rootfs.Layer(ctx, src, rootfs.WithEpoch(epoch), rootfs.WithTempDir(tmp))
	must(t, err)
	defer gz.(io.Closer).Close()

	if rep.DiffID != gzRep.DiffID {
		t.Errorf("diff id %s, the gzip layer's %s: want the same tar", rep.DiffID, gzRep.DiffID)
	}
	if rep.Digest != rep.DiffID || rep.Size != rep.UncompressedSize {
		t.Errorf("report %+v: want digest = diff id and size = uncompressed size", rep)
	}
	raw, err := os.ReadFile(l.(*rootfs.FileLayer).Path())
	must(t, err)
	if got := "sha256:" + fmt.Sprintf("%x", sha256.Sum256(raw)); got != rep.Digest.String() || int64(len(raw)) != rep.Size {
		t.Errorf("the file hashes to %s (%d bytes), the report says %s (%d bytes)", got, len(raw), rep.Digest, rep.Size)
	}
	if mt, _ := l.MediaType(); mt != types.OCIUncompressedLayer {
		t.Errorf("media type %s", mt)
	}
	for _, open := range []func() (io.ReadCloser, error){l.Compressed, l.Uncompressed} {
		rc, err := open()
		must(t, err)
		b, err := io.ReadAll(rc)
		must(t, err)
		must(t, rc.Close())
		if !bytes.Equal(b, raw) {
			t.Error("Compressed or Uncompressed is not the stored tar")
		}
	}
	fresh := t.TempDir()
	_, err = rootfs.ExtractLayers(ctx, []v1.Layer{l}, fresh)
	must(t, err)
	if d := diffDescriptions(describe(t, src, clamp), describe(t, fresh, clamp)); d != "" {
		t.Errorf("the extracted layer differs from the tree:\n%s", d)
	}

	// The report's Tree: nothing changed since, an empty layer; a change, caught.
	same, sameRep, err := rootfs.Diff(ctx, rep.Tree, src, rootfs.WithTempDir(tmp), rootfs.WithMediaType(types.OCIUncompressedLayer))
	must(t, err)
	must(t, same.(io.Closer).Close())
	if sameRep.Entries != 0 {
		t.Errorf("unchanged tree since the report's Tree gave %d entries", sameRep.Entries)
	}
	must(t, os.WriteFile(p("a/b/f"), []byte("content of F"), 0o644))
	next, nextRep, err := rootfs.Diff(ctx, rep.Tree, src, rootfs.WithTempDir(tmp), rootfs.WithMediaType(types.OCIUncompressedLayer))
	must(t, err)
	defer next.(io.Closer).Close()
	var names []string
	for _, h := range tarHeaders(t, next) {
		names = append(names, h.Name)
	}
	if want := []string{"a/", "a/b/", "a/b/f"}; !equal(names, want) || nextRep.Changed != 1 {
		t.Errorf("after a change of a/b/f: entries %v (report %+v), want %v, one changed", names, nextRep, want)
	}
	if _, _, err := rootfs.Layer(ctx, src, rootfs.WithMediaType(types.DockerUncompressedLayer)); !errors.Is(err, rootfs.ErrOption) {
		t.Errorf("a media type rootfs does not write: err %v, want ErrOption", err)
	}
}
