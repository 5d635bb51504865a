package selfrelease

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// TestLayersLinkedIntoLayout: a platform image's layer file becomes the OCI
// layout's blob by hard link (the same file, not a second copy), made while
// a build runs (one block at a time) or after, and the blob is what its
// digest says, the same either way; the layer files' folder is gone once
// the release is closed.
func TestLayersLinkedIntoLayout(t *testing.T) {
	var digests []v1.Hash
	for _, building := range []bool{true, false} {
		out := t.TempDir()
		r := newRun(context.Background(), Options{Out: out, Version: "v0.0.0-test"}, &source{commit: "c", epoch: time.Unix(1700000000, 0)}, &Result{})
		var err error
		if r.layout, err = layout.Write(filepath.Join(out, LayoutDir), empty.Index); err != nil {
			t.Fatal(err)
		}
		if r.layers, err = os.MkdirTemp(out, ".layers-"); err != nil {
			t.Fatal(err)
		}
		r.building.Store(building)
		// Three blocks of 1 MiB and some: half random, half text.
		b := make([]byte, 3<<20+12345)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range b {
			if i%2 == 0 {
				b[i] = byte(rng.Uint64())
			} else {
				b[i] = "slipway"[i%7]
			}
		}
		bin := filepath.Join(out, "slipway-cmp-linux-amd64")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		img, err := r.platformImage(context.Background(), "slipway-cmp", bin, v1.Platform{OS: "linux", Architecture: "amd64"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.linkLayers(img); err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %d, %v", len(layers), err)
		}
		fl := layers[0].(*rootfs.FileLayer)
		d, _ := fl.Digest()
		digests = append(digests, d)
		blob := filepath.Join(out, LayoutDir, "blobs", d.Algorithm, d.Hex)
		a, err := os.Stat(fl.Path())
		if err != nil {
			t.Fatal(err)
		}
		c, err := os.Stat(blob)
		if err != nil {
			t.Fatalf("building=%t: the layer is not in the layout: %v", building, err)
		}
		if !os.SameFile(a, c) || c.Mode().Perm() != 0o644 {
			t.Errorf("building=%t: blob %s is not the layer file linked, mode 0644 (mode %v)", building, d, c.Mode())
		}
		if err := r.layout.WriteImage(img); err != nil {
			t.Fatal(err)
		}
		if sum, _, err := fileSHA256(blob); err != nil || "sha256:"+sum != d.String() {
			t.Errorf("building=%t: blob %s holds sha256:%s (%v)", building, d, sum, err)
		}
		r.close()
		if _, err := os.Stat(r.layers); !os.IsNotExist(err) {
			t.Errorf("building=%t: %s left behind (%v)", building, r.layers, err)
		}
		if sum, _, err := fileSHA256(blob); err != nil || "sha256:"+sum != d.String() {
			t.Errorf("building=%t: after close, blob %s holds sha256:%s (%v)", building, d, sum, err)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("the layer made beside a build is %s, after the builds %s", digests[0], digests[1])
	}
}
