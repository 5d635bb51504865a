package rootfs_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// Freeze a directory as a base layer, unpack it, let a step change it, and
// freeze the change as a second layer.
func Example() {
	ctx := context.Background()
	tmp, _ := os.MkdirTemp("", "rootfs-example")
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	_ = os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	_ = os.WriteFile(filepath.Join(src, "etc", "motd"), []byte("hello\n"), 0o644)
	_ = os.WriteFile(filepath.Join(src, "etc", "old"), []byte("old\n"), 0o644)

	// The caller turns SOURCE_DATE_EPOCH into a time; the package never reads it.
	epoch := rootfs.WithEpoch(time.Unix(1700000000, 0))
	base, _, err := rootfs.Layer(ctx, src, epoch, rootfs.WithOwner(0, 0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer base.(io.Closer).Close()
	img, _ := mutate.AppendLayers(empty.Image, base)

	work := filepath.Join(tmp, "work")
	rep, err := rootfs.Extract(ctx, img, work)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("extracted %d files, %d dirs, %d bytes\n", rep.Files, rep.Dirs, rep.Bytes)

	snap, _ := rootfs.Snapshot(work)
	_ = os.WriteFile(filepath.Join(work, "etc", "motd"), []byte("HELLO\n"), 0o644) // same size
	_ = os.Remove(filepath.Join(work, "etc", "old"))
	_ = os.WriteFile(filepath.Join(work, "etc", "new"), []byte("new\n"), 0o644)

	layer, diff, err := rootfs.Diff(ctx, snap, work, epoch, rootfs.WithOwner(0, 0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer layer.(io.Closer).Close()
	fmt.Printf("added %d, changed %d, deleted %d, parents %d\n", diff.Added, diff.Changed, diff.Deleted, diff.Parents)
	rc, _ := layer.Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		fmt.Println(h.Name, h.ModTime.Unix())
	}
	// Output:
	// extracted 2 files, 1 dirs, 10 bytes
	// added 1, changed 2, deleted 1, parents 0
	// etc/ 1700000000
	// etc/.wh.old 1700000000
	// etc/motd 1700000000
	// etc/new 1700000000
}
