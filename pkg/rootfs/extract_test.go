package rootfs_test

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/rootfs"

	"github.com/slipway-dev/slipway/testharness/need"
)

func TestExtractWhiteouts(t *testing.T) {
	lower := layerOf(t,
		dir("a/"), file("a/x", "x"), file("a/y", "y"),
		dir("b/"), file("b/old", "old"), dir("b/sub/"), file("b/sub/deep", "deep"),
		dir("c/"), file("c/gone", "gone"), file("c/keep", "keep"),
		file("f", "f"), dir("o/"), file("o/lower", "l"),
	)
	upper := layerOf(t,
		file("a/.wh.x", ""),        // a file
		file(".wh.f", ""),          // at the root
		file("b/.wh..wh..opq", ""), // opaque before the new contents
		dir("b/sub/"), file("b/sub/new", "new"),
		file("c/.wh.gone", ""), file("c/.wh.never-was", ""), // a missing name is fine
		file("nope/.wh.x", ""),                           // so is a missing parent
		file("o/upper", "u"), file("o/.wh..wh..opq", ""), // opaque after the new contents
		file("n", "n"), file(".wh.n", ""), // same layer: stays
		file("a/.wh..wh.plnk", ""), // aufs bookkeeping: ignored
	)
	dst := t.TempDir()
	rep, err := rootfs.Extract(context.Background(), imageOf(t, lower, upper), dst)
	if err != nil {
		t.Fatal(err)
	}
	got := names(t, dst)
	want := []string{"a", "a/y", "b", "b/sub", "b/sub/new", "c", "c/keep", "n", "o", "o/upper"}
	if !equal(got, want) {
		t.Errorf("tree = %v\nwant %v", got, want)
	}
	if rep.Whiteouts != 7 || rep.Layers != 2 {
		t.Errorf("report %+v: want 7 whiteouts over 2 layers", rep)
	}
}

func TestExtractMetadata(t *testing.T) {
	mt := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	dmt := time.Date(2018, 1, 2, 3, 4, 5, 0, time.UTC)
	l := layerOf(t,
		ent{name: "bin/", typ: tar.TypeDir, mode: 0o2775, uid: 10, gid: 20, mtime: dmt},
		ent{name: "bin/su", typ: tar.TypeReg, mode: 0o4755, body: "su", uid: 0, gid: 0, mtime: mt},
		ent{name: "bin/wall", typ: tar.TypeReg, mode: 0o2711, body: "w", uid: 1234, gid: 5678, mtime: mt},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777, mtime: dmt},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555, mtime: dmt},
		ent{name: "ro/f", typ: tar.TypeReg, mode: 0o400, body: "r", mtime: mt},
		ent{name: "bin/sh", typ: tar.TypeSymlink, link: "/bin/busybox", uid: 7, gid: 8, mtime: mt},
		ent{name: "bin/su2", typ: tar.TypeLink, link: "bin/su"},
		ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o620, uid: 3, gid: 4, mtime: mt},
	)
	dst := t.TempDir()
	rep, err := rootfs.Extract(context.Background(), imageOf(t, l), dst)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bin":      "dir mode=2775 owner=10:20 mtime=2018-01-02T03:04:05Z",
		"bin/su":   "file size=2 sha=" + sha("su") + " nlink=2 mode=4755 owner=0:0 mtime=2021-03-04T05:06:07Z",
		"bin/su2":  "file size=2 sha=" + sha("su") + " nlink=2 mode=4755 owner=0:0 mtime=2021-03-04T05:06:07Z",
		"bin/wall": "file size=1 sha=" + sha("w") + " nlink=1 mode=2711 owner=1234:5678 mtime=2021-03-04T05:06:07Z",
		"bin/sh":   "symlink -> /bin/busybox mode=777 owner=7:8 mtime=2021-03-04T05:06:07Z",
		"tmp":      "dir mode=1777 owner=0:0 mtime=2018-01-02T03:04:05Z",
		"ro":       "dir mode=555 owner=0:0 mtime=2018-01-02T03:04:05Z",
		"ro/f":     "file size=1 sha=" + sha("r") + " nlink=1 mode=400 owner=0:0 mtime=2021-03-04T05:06:07Z",
		"run":      "dir mode=755 owner=0:0 mtime=1970-01-01T00:00:00Z",
		"run/fifo": "p--------- mode=620 owner=3:4 mtime=2021-03-04T05:06:07Z",
	}
	need.Root(t, "extraction sets ownership only as root")
	if d := diffDescriptions(want, describe(t, dst, asIs)); d != "" {
		t.Errorf("extracted tree differs:\n%s", d)
	}
	if rep.Files != 3 || rep.Hardlinks != 1 || rep.Symlinks != 1 || rep.Fifos != 1 || rep.Dirs != 4 || rep.Bytes != 4 {
		t.Errorf("report %+v", rep)
	}
}

func TestExtractWithoutOwnership(t *testing.T) {
	l := layerOf(t, ent{name: "f", typ: tar.TypeReg, mode: 0o4755, body: "x", uid: 1234, gid: 5678})
	dst := t.TempDir()
	if _, err := rootfs.Extract(context.Background(), imageOf(t, l), dst, rootfs.WithoutOwnership()); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, filepath.Join(dst, "f"))
	if int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != 0o4755 {
		t.Errorf("owner %d mode %o, want %d and 4755", st.Uid, st.Mode&0o7777, os.Geteuid())
	}
}

// TestExtractReplaces checks that a later layer replaces what stands at a
// name, whatever its type, without following it.
func TestExtractReplaces(t *testing.T) {
	j := newJail(t)
	lower := layerOf(t, symlink("s", j.parent), dir("d/"), file("d/x", "x"), file("f", "f"), file("t", "t"))
	upper := layerOf(t, dir("s/"), file("s/in", "in"), file("d", "now a file"), dir("f/"), symlink("t", "/etc/shadow"))
	if _, err := rootfs.Extract(context.Background(), imageOf(t, lower, upper), j.dir); err != nil {
		t.Fatal(err)
	}
	j.check(t)
	got := describe(t, j.dir, func(time.Time) time.Time { return time.Time{} })
	for p, prefix := range map[string]string{"s": "dir", "s/in": "file", "d": "file", "f": "dir", "t": "symlink -> /etc/shadow"} {
		if len(got[p]) < len(prefix) || got[p][:len(prefix)] != prefix {
			t.Errorf("%s = %q, want %s", p, got[p], prefix)
		}
	}
	if _, ok := got["d/x"]; ok {
		t.Error("d/x survived d becoming a file")
	}
}

func lstat(t testing.TB, p string) *syscall.Stat_t {
	t.Helper()
	info, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t)
}

func names(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for p := range describe(t, dir, asIs) {
		out = append(out, p)
	}
	return sortStrings(out)
}
