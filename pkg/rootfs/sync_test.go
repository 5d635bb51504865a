package rootfs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// statOf is the inode and ctime of a path, what Diff tells a file by.
func statOf(t *testing.T, p string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func syncTar(t *testing.T, dir string, ents ...ent) (*rootfs.SyncReport, error) {
	t.Helper()
	return rootfs.SyncTar(context.Background(), bytes.NewReader(tarBytes(t, ents...)), dir, rootfs.WithoutOwnership())
}

// TestSyncTar: a second stream synced into the first one's tree leaves an
// unchanged file as it was (same inode and ctime: Diff against a snapshot
// taken after the first sees it unchanged), replaces a file whose bytes
// changed though its size and mtime did not (a rewrite that set its mtime
// back), removes what the stream no longer holds, adds what is new; a file
// hardlinked in the kept tree that the stream holds as two files becomes
// two.
func TestSyncTar(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 40<<10) // 640 KiB: the difference is past the first read
	changed := []byte(big)
	changed[500<<10] ^= 1
	kept := filepath.Join(t.TempDir(), "kept")
	first := []ent{dir("d/"), file("d/same", big), file("d/changed", big), file("d/gone", "bye"), dir("d/old/"), file("d/old/x", "x"),
		symlink("l", "d/same"), file("pair", "p")}
	rep, err := syncTar(t, kept, first...)
	if err != nil || rep.Kept != 0 || rep.Files != 5 || rep.Removed != 0 {
		t.Fatalf("first sync: %+v %v", rep, err)
	}
	if err := os.Link(filepath.Join(kept, "pair"), filepath.Join(kept, "pair2")); err != nil {
		t.Fatal(err)
	}
	if _, err := syncTar(t, kept, append(first, hardlink("pair2", "pair"))...); err != nil { // pair2 hardlinked to pair in the tree
		t.Fatal(err)
	}
	tree, err := rootfs.Snapshot(kept)
	if err != nil {
		t.Fatal(err)
	}
	same, old := statOf(t, filepath.Join(kept, "d/same")), statOf(t, filepath.Join(kept, "d/changed"))
	pair := statOf(t, filepath.Join(kept, "pair"))

	rep, err = syncTar(t, kept, dir("d/"), file("d/same", big), file("d/changed", string(changed)), symlink("l", "d/same"),
		file("d/new", "new"), file("pair", "p"), file("pair2", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replaced != 1 || rep.Removed != 2 || rep.KeptBytes != int64(len(big))+1 {
		t.Errorf("report %+v: want 1 replaced, 2 removed (d/gone, d/old), d/same and pair kept", rep)
	}
	if now := statOf(t, filepath.Join(kept, "d/same")); now.Ino != same.Ino || now.Ctim != same.Ctim {
		t.Errorf("d/same: inode %d ctime %v, was %d %v", now.Ino, now.Ctim, same.Ino, same.Ctim)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "d/changed")); err != nil || !bytes.Equal(b, changed) {
		t.Errorf("d/changed does not hold the stream's bytes (%v)", err)
	}
	if now := statOf(t, filepath.Join(kept, "d/changed")); now.Ino == old.Ino || now.Mtim != old.Mtim || now.Size != old.Size {
		t.Errorf("d/changed: inode %d mtime %v size %d, was %d %v %d", now.Ino, now.Mtim, now.Size, old.Ino, old.Mtim, old.Size)
	}
	p1, p2 := statOf(t, filepath.Join(kept, "pair")), statOf(t, filepath.Join(kept, "pair2"))
	if p1.Ino != pair.Ino || p2.Ino == p1.Ino || p1.Nlink != 1 {
		t.Errorf("pair %d (nlink %d), pair2 %d: want pair kept, pair2 a file of its own", p1.Ino, p1.Nlink, p2.Ino)
	}
	if got, want := names(t, kept), []string{"d", "d/changed", "d/new", "d/same", "l", "pair", "pair2"}; !equal(got, want) {
		t.Errorf("tree %v, want %v", got, want)
	}

	l, drep, err := rootfs.Diff(context.Background(), tree, kept)
	if err != nil {
		t.Fatal(err)
	}
	defer l.(interface{ Close() error }).Close()
	var got []string
	for _, h := range tarHeaders(t, l) {
		got = append(got, h.Name)
	}
	// d is a parent (its mtime is the stream's again); pair's link count
	// moved its ctime.
	want := []string{"d/", "d/.wh.gone", "d/.wh.old", "d/changed", "d/new", "pair", "pair2"}
	if !equal(got, want) || drep.Added != 1 {
		t.Errorf("diff after the sync holds %v, want %v (%+v)", got, want, drep)
	}

	// Nothing changed: nothing moves.
	tree, err = rootfs.Snapshot(kept)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syncTar(t, kept, dir("d/"), file("d/same", big), file("d/changed", string(changed)), symlink("l", "d/same"),
		file("d/new", "new"), file("pair", "p"), file("pair2", "p")); err != nil {
		t.Fatal(err)
	}
	l2, drep, err := rootfs.Diff(context.Background(), tree, kept)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.(interface{ Close() error }).Close()
	if drep.Entries != 0 {
		t.Errorf("an unchanged stream gives a diff of %d entries: %v", drep.Entries, tarHeaders(t, l2))
	}
}

// TestSyncTarRefuses: SyncTar has ExtractTar's checks against a kept tree
// too: an escape, a write through a symbolic link (named in the stream,
// or kept from the last one), a device node are refused naming the entry,
// nothing is written outside the target; a name that would read as a
// whiteout is refused.
func TestSyncTarRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kept  func(j jail) []ent // the stream synced before
		ents  func(j jail) []ent
		entry string
		want  error
	}{
		{"dot-dot", nil, func(jail) []ent { return []ent{file("../x", "x")} }, "../x", rootfs.ErrUnsafeEntry},
		{"through symlink", nil, func(j jail) []ent { return []ent{symlink("out", j.parent), file("out/x", "x")} }, "out/x", rootfs.ErrUnsafeEntry},
		{"through a kept symlink", func(j jail) []ent { return []ent{symlink("out", j.parent)} },
			func(j jail) []ent { return []ent{file("out/sentinel", "overwritten")} }, "out/sentinel", rootfs.ErrUnsafeEntry},
		{"hardlink through a kept symlink", func(j jail) []ent { return []ent{symlink("out", j.parent)} },
			func(j jail) []ent { return []ent{symlink("out", j.parent), hardlink("h", "out/sentinel")} }, "h", rootfs.ErrUnsafeEntry},
		{"device", nil, func(jail) []ent { return []ent{{name: "dev", typ: tar.TypeChar, mode: 0o666}} }, "dev", rootfs.ErrUnsafeEntry},
		{"whiteout name", nil, func(jail) []ent { return []ent{file("a", "a"), file(".wh.a", "")} }, ".wh.a", rootfs.ErrUnsupported},
		{"over the byte limit", func(jail) []ent { return []ent{file("a", strings.Repeat("a", 600))} },
			func(jail) []ent {
				return []ent{file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 600))}
			}, "b", rootfs.ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJail(t)
			if tc.kept != nil {
				if _, err := syncTar(t, j.dir, tc.kept(j)...); err != nil {
					t.Fatal(err)
				}
			}
			_, err := rootfs.SyncTar(context.Background(), bytes.NewReader(tarBytes(t, tc.ents(j)...)), j.dir,
				rootfs.WithoutOwnership(), rootfs.WithMaxBytes(1000))
			var ee *rootfs.EntryError
			if !errors.Is(err, tc.want) || !errors.As(err, &ee) || ee.Name != tc.entry {
				t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.entry)
			}
			j.check(t)
		})
	}
}

// BenchmarkSyncTar is what telling an unchanged file by its bytes costs:
// a 100 MB workspace (1,000 files of 100 KiB, random) as a tar stream,
// unpacked into an empty directory (what each checkpoint of a streamed
// workspace did before: every byte written), synced into the kept copy
// of the same stream (every kept byte read and compared, nothing
// written), and synced with 10 files (1 MB) changed.
func BenchmarkSyncTar(b *testing.B) {
	const files, size = 1000, 100 << 10
	rng := rand.New(rand.NewPCG(39, 1))
	ents := make([]ent, 0, files+10)
	ents = append(ents, dir("ws/"))
	for i := range files {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		ents = append(ents, ent{name: fmt.Sprintf("ws/f%04d", i), typ: tar.TypeReg, mode: 0o644, body: string(body)})
	}
	same := tarBytes(b, ents...)
	for i := 0; i < files; i += files / 10 {
		body := []byte(ents[1+i].body)
		body[size/2] ^= 1
		ents[1+i].body = string(body)
	}
	changed := tarBytes(b, ents...)
	ctx := context.Background()
	b.Run("extract", func(b *testing.B) {
		b.SetBytes(files * size)
		for b.Loop() {
			b.StopTimer()
			d := filepath.Join(b.TempDir(), "ws")
			b.StartTimer()
			if _, err := rootfs.ExtractTar(ctx, bytes.NewReader(same), d, rootfs.WithoutOwnership()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name   string
		stream []byte
	}{{"sync-unchanged", same}, {"sync-1MB-changed", changed}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(files * size)
			for b.Loop() {
				b.StopTimer()
				d := filepath.Join(b.TempDir(), "ws")
				if _, err := rootfs.SyncTar(ctx, bytes.NewReader(same), d, rootfs.WithoutOwnership()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rep, err := rootfs.SyncTar(ctx, bytes.NewReader(bc.stream), d, rootfs.WithoutOwnership())
				if err != nil {
					b.Fatal(err)
				}
				if bc.name == "sync-unchanged" && rep.Kept != files+1 {
					b.Fatalf("kept %d of %d", rep.Kept, files+1)
				}
			}
		})
	}
}
