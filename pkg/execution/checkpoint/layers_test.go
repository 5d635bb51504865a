package checkpoint

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Create stores its layer as the tar itself, hashed once and linked from
// where it was written (nothing is left in the store's tmp), and Restore
// reads it back into the same tree.
func TestLayerIsTheTar(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "README"), []byte("first entry of the tar"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "src/main.go"), []byte("package main\n"), 0o644))
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	cp, _, err := Create(ctx, st, Source{Dir: ws}, testMeta(), WithSigner(sv))
	must(t, err)

	m, err := st.manifest(mustHash(t, cp.Digest))
	must(t, err)
	if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCIUncompressedLayer {
		t.Fatalf("layers %+v, want one of %s", m.Layers, types.OCIUncompressedLayer)
	}
	d := m.Layers[0]
	blob, err := os.ReadFile(filepath.Join(st.dir, "blobs", "sha256", d.Digest.Hex))
	must(t, err)
	if got := fmt.Sprintf("%x", sha256.Sum256(blob)); got != d.Digest.Hex || int64(len(blob)) != d.Size {
		t.Fatalf("blob hashes to %s (%d bytes), the manifest says %s (%d bytes)", got, len(blob), d.Digest, d.Size)
	}
	if hdr, err := tar.NewReader(bytes.NewReader(blob)).Next(); err != nil || hdr.Name != "README" {
		t.Fatalf("the blob's first entry: %v, %v; want the workspace's first file", hdr, err)
	}
	if left, err := os.ReadDir(filepath.Join(st.dir, "tmp")); err != nil || len(left) != 0 {
		t.Errorf("the store's tmp holds %d files (%v) after Create", len(left), err)
	}
	to := filepath.Join(tmp, "restored")
	_, _, _, err = Restore(ctx, st, cp.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}, to)
	must(t, err)
	equalTrees(t, hashTree(t, ws), hashTree(t, to))
}

// rawNameTar is a one-file tar whose first name is name's bytes as they
// are, as GNU tar writes a name that is not ASCII (Go's writer would add
// a PAX header before it).
func rawNameTar(t *testing.T, name, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	placeholder := strings.Repeat("x", len(name))
	must(t, tw.WriteHeader(&tar.Header{Name: placeholder, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1e9, 0), Format: tar.FormatUSTAR}))
	_, err := tw.Write([]byte(body))
	must(t, err)
	must(t, tw.Close())
	raw := b.Bytes()
	copy(raw, name)
	// The header's checksum: the sum of its bytes, the field counted as spaces.
	copy(raw[148:156], "        ")
	sum := 0
	for _, c := range raw[:512] {
		sum += int(c)
	}
	copy(raw[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return raw
}

// A checkpoint whose layer is gzip (as checkpoints were first written)
// restores; one whose layer has a media type no checkpoint has is refused
// before anything is written.
func TestRestoreLayerTypes(t *testing.T) {
	ctx := context.Background()
	sv, v := keys(t)
	tmp := t.TempDir()
	st, err := OpenStore(filepath.Join(tmp, "store"))
	must(t, err)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	must(t, tw.WriteHeader(&tar.Header{Name: "notes.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5, ModTime: time.Unix(1e9, 0)}))
	_, err = tw.Write([]byte("hello"))
	must(t, err)
	must(t, tw.Close())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(tb.Bytes())
	must(t, err)
	must(t, zw.Close())

	magic := "\x1f\x8bnotes.txt" // gzip's magic number, then a name
	for _, c := range []struct {
		name string
		mt   types.MediaType
		blob []byte
		ok   bool
		file string
	}{
		{"gzip", types.OCILayer, gz.Bytes(), true, "notes.txt"},
		{"tar", types.OCIUncompressedLayer, tb.Bytes(), true, "notes.txt"},
		// go-containerregistry guesses a blob's compression from its first
		// bytes; the media type says it is a tar.
		{"tar-with-gzip-magic", types.OCIUncompressedLayer, rawNameTar(t, magic, "hello"), true, magic},
		{"zstd", types.MediaType("application/vnd.oci.image.layer.v1.tar+zstd"), tb.Bytes(), false, ""},
		{"docker", types.DockerLayer, gz.Bytes(), false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			lh, err := st.writeBlob(c.blob)
			must(t, err)
			m := testMeta()
			m.RunID = "types-" + c.name
			pred := Predicate{Meta: m, Created: time.Now().UTC(), Layers: 1}
			cp, err := st.commit(ctx, sv, pred, []v1.Descriptor{{MediaType: c.mt, Digest: lh, Size: int64(len(c.blob))}})
			must(t, err)
			to := filepath.Join(tmp, "to-"+c.name)
			_, _, _, err = Restore(ctx, st, cp.Digest, v, Expect{Tenant: "acme", Generations: []string{"gen-a"}}, to)
			if c.ok {
				must(t, err)
				if b, err := os.ReadFile(filepath.Join(to, c.file)); err != nil || string(b) != "hello" {
					t.Fatalf("restored %q: %q, %v", c.file, b, err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("err %v, want ErrRefused for a %s layer", err, c.mt)
			}
			if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused restore touched its target: %v", err)
			}
		})
	}
}
