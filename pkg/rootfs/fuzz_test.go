package rootfs_test

import (
	"archive/tar"
	"context"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// FuzzExtract feeds arbitrary bytes as a layer, over a lower layer holding a
// symlink out of the target: Extract may refuse, but must never panic nor
// write outside the target.
func FuzzExtract(f *testing.F) {
	seeds := [][]ent{
		{dir("a/"), file("a/b", "hello"), symlink("a/s", "../../x"), hardlink("a/h", "a/b")},
		{file("/abs", "x"), file("../x", "x")},
		{symlink("l", "/tmp"), file("l/x", "x")},
		{file("out/x", "x"), hardlink("h", "out/sentinel")},
		{dir("d/"), file("d/.wh..wh..opq", ""), file(".wh.d", ""), file("d/.wh.x", "")},
		{ent{name: "dev", typ: tar.TypeChar}, ent{name: "p", typ: tar.TypeFifo, mode: 0o600}},
		{ent{name: "big", typ: tar.TypeReg, size: 1 << 40}},
	}
	for _, s := range seeds {
		f.Add(tarBytes(f, s...))
	}
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		j := newJail(t)
		lower := layerOf(t, symlink("out", j.parent), dir("d/"), file("d/x", "x"))
		_, _ = rootfs.ExtractLayers(context.Background(), []v1.Layer{lower, layerFromBytes(t, b)}, j.dir,
			rootfs.WithMaxBytes(1<<20), rootfs.WithMaxEntries(1000))
		j.check(t)
	})
}
