package rootfs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// goldenDigest is the digest of the layer of goldenTree. It changes only
// when the layer format or the compressor changes (the klauspost/compress
// version, the level, the block size): every layer digest moves with it, so
// update it deliberately and say so.
const goldenDigest = "sha256:7d1ec517287699484ddb482b453f66a9965d015b3a498a709a7ec5a587fefcfc"

// goldenTree writes a tree of about 3 MiB (several pgzip blocks), half of it
// random, from a fixed seed and with explicit modes.
func goldenTree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 48 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%6))
		must(t, os.MkdirAll(sub, 0o755))
		must(t, os.Chmod(sub, 0o755))
		b := make([]byte, 32<<10+int(rng.Uint64()%(64<<10)))
		for j := range b {
			if i%2 == 0 {
				b[j] = byte(rng.Uint64())
			} else {
				b[j] = "slipway rootfs layer\n"[j%21]
			}
		}
		p := filepath.Join(sub, fmt.Sprintf("f%02d", i))
		must(t, os.WriteFile(p, b, 0o644))
		must(t, os.Chmod(p, os.FileMode(0o644|(i%3)<<6)))
	}
	must(t, os.Symlink("d00/f00", filepath.Join(dir, "link")))
	return dir
}

func layerDigest(t testing.TB, dir string, procs int, opts ...rootfs.LayerOption) string {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	l, _, err := rootfs.Layer(context.Background(), dir, append([]rootfs.LayerOption{rootfs.WithEpoch(epoch), rootfs.WithOwner(0, 0)}, opts...)...)
	must(t, err)
	defer l.(io.Closer).Close()
	d, err := l.Digest()
	must(t, err)
	return d.String()
}

// TestDeterminism: the same tree gives the same layer twice, under
// GOMAXPROCS 1 and 2 and 8, compressing one block at a time, from a second copy written at another time, and
// equal to the golden digest.
func TestDeterminism(t *testing.T) {
	dir := goldenTree(t)
	first := layerDigest(t, dir, 1)
	for _, procs := range []int{1, 2, 8} {
		if got := layerDigest(t, dir, procs); got != first {
			t.Errorf("GOMAXPROCS=%d: digest %s, want %s", procs, got, first)
		}
	}
	// One block at a time, as a release's layers made beside its builds.
	if got := layerDigest(t, dir, 2, rootfs.WithCompressionConcurrency(1)); got != first {
		t.Errorf("one block at a time: digest %s, want %s", got, first)
	}
	if got := layerDigest(t, goldenTree(t), 2); got != first {
		t.Errorf("a second copy of the tree: digest %s, want %s", got, first)
	}
	if first != goldenDigest {
		t.Errorf("digest %s, golden %s: the layer bytes changed (compressor, level, block size or format)", first, goldenDigest)
	}
}

// TestCompressionConcurrencyRefused: fewer than one block at a time is
// refused before anything is written.
func TestCompressionConcurrencyRefused(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, _, err := rootfs.Layer(context.Background(), t.TempDir(), rootfs.WithCompressionConcurrency(n))
		if !errors.Is(err, rootfs.ErrOption) {
			t.Errorf("concurrency %d: err = %v, want ErrOption", n, err)
		}
	}
}
