package rootfs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// TestExtractRefuses builds hostile layers and expects each to be refused,
// naming the entry, with nothing written outside the target.
func TestExtractRefuses(t *testing.T) {
	passwd, err := os.Lstat("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		layers func(j jail) [][]ent
		opts   []rootfs.ExtractOption
		entry  string // the entry the error must name
		want   error
		reason string // a word the message must hold
	}{
		{"absolute path", one(file("/abs", "x")), nil, "/abs", rootfs.ErrUnsafeEntry, "absolute"},
		{"dot-dot", one(file("../x", "x")), nil, "../x", rootfs.ErrUnsafeEntry, `".."`},
		{"dot-dot inside", one(dir("a/"), file("a/../../x", "x")), nil, "a/../../x", rootfs.ErrUnsafeEntry, `".."`},
		{"dot-dot directory", one(dir("a/../../d/")), nil, "a/../../d/", rootfs.ErrUnsafeEntry, `".."`},
		{"write through symlink to outside", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent), file("out/x", "x")}}
		}, nil, "out/x", rootfs.ErrUnsafeEntry, "symlink"},
		{"write through relative symlink", one(symlink("up", ".."), file("up/x", "x")), nil, "up/x", rootfs.ErrUnsafeEntry, "symlink"},
		{"write through inside symlink", one(dir("d/"), symlink("l", "d"), file("l/x", "x")), nil, "l/x", rootfs.ErrUnsafeEntry, "symlink"},
		{"symlink in lower layer", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent)}, {file("out/x", "x")}}
		}, nil, "out/x", rootfs.ErrUnsafeEntry, "symlink"},
		{"directory through symlink", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent), dir("out/sub/")}}
		}, nil, "out/sub/", rootfs.ErrUnsafeEntry, "symlink"},
		{"whiteout through symlink", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent), file("out/.wh.sentinel", "")}}
		}, nil, "out/.wh.sentinel", rootfs.ErrUnsafeEntry, "symlink"},
		{"opaque through symlink", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent)}, {file("out/.wh..wh..opq", "")}}
		}, nil, "out/.wh..wh..opq", rootfs.ErrUnsafeEntry, "symlink"},
		{"file as parent", one(file("f", "x"), file("f/x", "x")), nil, "f/x", rootfs.ErrUnsafeEntry, "not a directory"},
		{"hardlink absolute", one(hardlink("h", "/etc/passwd")), nil, "h", rootfs.ErrUnsafeEntry, "absolute"},
		{"hardlink dot-dot", one(hardlink("h", "../sentinel")), nil, "h", rootfs.ErrUnsafeEntry, `".."`},
		{"hardlink missing", one(hardlink("h", "nope")), nil, "h", rootfs.ErrUnsafeEntry, "does not exist"},
		{"hardlink missing parent", one(hardlink("h", "no/pe")), nil, "h", rootfs.ErrUnsafeEntry, "does not exist"},
		{"hardlink to symlink", func(j jail) [][]ent {
			return [][]ent{{symlink("s", j.sentinel), hardlink("h", "s")}}
		}, nil, "h", rootfs.ErrUnsafeEntry, "not a regular file"},
		{"hardlink to directory", one(dir("d/"), hardlink("h", "d")), nil, "h", rootfs.ErrUnsafeEntry, "not a regular file"},
		{"hardlink through symlink", func(j jail) [][]ent {
			return [][]ent{{symlink("out", j.parent), hardlink("h", "out/sentinel")}}
		}, nil, "h", rootfs.ErrUnsafeEntry, "symlink"},
		{"hardlink to itself", one(file("f", "x"), hardlink("f", "f")), nil, "f", rootfs.ErrUnsafeEntry, "refused"},
		{"char device", one(ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666}), nil, "dev/null", rootfs.ErrUnsafeEntry, "device"},
		{"block device", one(ent{name: "sda", typ: tar.TypeBlock, mode: 0o660}), nil, "sda", rootfs.ErrUnsafeEntry, "device"},
		{"root as a file", one(file(".", "x")), nil, ".", rootfs.ErrUnsafeEntry, "root"},
		{"whiteout of dot-dot", one(file(".wh...", "")), nil, ".wh...", rootfs.ErrUnsafeEntry, "whiteout"},
		{"huge declared size", one(ent{name: "big", typ: tar.TypeReg, mode: 0o644, size: 16 << 30}), nil, "big", rootfs.ErrLimit, "max bytes"},
		{"over a byte limit", one(file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 600))),
			[]rootfs.ExtractOption{rootfs.WithMaxBytes(1000)}, "b", rootfs.ErrLimit, "max bytes"},
		{"over the entry limit", one(file("a", ""), file("b", ""), file("c", "")),
			[]rootfs.ExtractOption{rootfs.WithMaxEntries(2)}, "c", rootfs.ErrLimit, "max entries"},
		{"name too long", one(file(strings.Repeat("n", 300), "")),
			[]rootfs.ExtractOption{rootfs.WithMaxNameLength(255)}, strings.Repeat("n", 300), rootfs.ErrLimit, "max name length"},
		{"link target too long", one(symlink("s", strings.Repeat("t", 300))),
			[]rootfs.ExtractOption{rootfs.WithMaxNameLength(255)}, "s", rootfs.ErrLimit, "max name length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJail(t)
			var layers []v1.Layer
			for _, ents := range tc.layers(j) {
				layers = append(layers, layerOf(t, ents...))
			}
			_, err := rootfs.Extract(context.Background(), imageOf(t, layers...), j.dir, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var ee *rootfs.EntryError
			if !errors.As(err, &ee) || ee.Name != tc.entry {
				t.Fatalf("err = %v, want an EntryError naming %q", err, tc.entry)
			}
			if ee.Layer != len(layers)-1 || ee.Digest.Hex == "" {
				t.Errorf("err names layer %d %v, want %d and its digest", ee.Layer, ee.Digest, len(layers)-1)
			}
			if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), ee.Digest.String()) {
				t.Errorf("message %q lacks %q or the digest", err, tc.reason)
			}
			j.check(t)
			after, err := os.Lstat("/etc/passwd")
			if err != nil || after.Sys().(*syscall.Stat_t).Nlink != passwd.Sys().(*syscall.Stat_t).Nlink {
				t.Errorf("/etc/passwd gained a link")
			}
		})
	}
}

func one(ents ...ent) func(jail) [][]ent {
	return func(jail) [][]ent { return [][]ent{ents} }
}

// TestExtractTarget refuses a target that is not empty and creates an
// absent one.
func TestExtractTarget(t *testing.T) {
	img := imageOf(t, layerOf(t, file("f", "x")))
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rootfs.Extract(context.Background(), img, full); !errors.Is(err, rootfs.ErrTarget) {
		t.Errorf("non-empty target: err = %v, want ErrTarget", err)
	}
	absent := filepath.Join(t.TempDir(), "a", "b")
	if _, err := rootfs.Extract(context.Background(), img, absent); err != nil {
		t.Errorf("absent target: %v", err)
	}
	if _, err := rootfs.Extract(context.Background(), img, t.TempDir(), rootfs.WithMaxBytes(-1)); !errors.Is(err, rootfs.ErrOption) {
		t.Errorf("negative limit: err = %v, want ErrOption", err)
	}
}

// TestExtractCancelled stops at a cancelled context.
func TestExtractCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := rootfs.Extract(ctx, imageOf(t, layerOf(t, file("f", "x"))), t.TempDir())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestExtractTarRefuses: a plain tar stream (one copied out of a sandbox)
// gets the checks of a layer: an escape, a write through a symlink and a
// device node are refused, naming the entry, with nothing written outside
// the target; a sound stream is extracted.
func TestExtractTarRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ents  func(j jail) []ent
		entry string
		want  error
	}{
		{"dot-dot", func(jail) []ent { return []ent{file("../x", "x")} }, "../x", rootfs.ErrUnsafeEntry},
		{"through symlink", func(j jail) []ent { return []ent{symlink("out", j.parent), file("out/x", "x")} }, "out/x", rootfs.ErrUnsafeEntry},
		{"device", func(jail) []ent {
			return []ent{{name: "dev", typ: tar.TypeChar, mode: 0o666}}
		}, "dev", rootfs.ErrUnsafeEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJail(t)
			_, err := rootfs.ExtractTar(context.Background(), bytes.NewReader(tarBytes(t, tc.ents(j)...)), j.dir, rootfs.WithoutOwnership())
			var ee *rootfs.EntryError
			if !errors.Is(err, tc.want) || !errors.As(err, &ee) || ee.Name != tc.entry {
				t.Fatalf("err = %v, want %v naming %q", err, tc.want, tc.entry)
			}
			j.check(t)
		})
	}
	j := newJail(t)
	rep, err := rootfs.ExtractTar(context.Background(), bytes.NewReader(tarBytes(t, dir("d/"), file("d/f", "hello"), symlink("l", "d/f"))), j.dir)
	if err != nil || rep.Files != 1 || rep.Symlinks != 1 || rep.Bytes != 5 {
		t.Fatalf("sound stream: %+v %v", rep, err)
	}
	if b, err := os.ReadFile(filepath.Join(j.dir, "d", "f")); err != nil || string(b) != "hello" {
		t.Fatalf("d/f: %q %v", b, err)
	}
	j.check(t)
}
