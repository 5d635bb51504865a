package rootfs

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/pgzip"
)

// FileLayer is the v1.Layer that Diff and Layer return: a gzip-compressed
// tar in a file (or the tar itself, for types.OCIUncompressedLayer), written
// once, with its digest, diff id and size computed while it was written.
// Close removes the file; a layer is unusable after it. Callers holding it
// as a v1.Layer reach Close through io.Closer.
type FileLayer struct {
	path       string
	digest     v1.Hash
	diffID     v1.Hash
	size       int64
	mediaType  types.MediaType
	compressed bool
}

var (
	_ v1.Layer  = (*FileLayer)(nil)
	_ io.Closer = (*FileLayer)(nil)
)

// Path is the file holding the layer's bytes (compressed, when it is).
func (l *FileLayer) Path() string { return l.path }

// Digest is the sha256 of the layer's bytes (compressed, when it is).
func (l *FileLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the sha256 of the uncompressed tar.
func (l *FileLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Size is the length of the layer's bytes (compressed, when it is).
func (l *FileLayer) Size() (int64, error) { return l.size, nil }

// MediaType is the layer's media type.
func (l *FileLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }

// Compressed opens the layer's bytes as stored: the tar itself for an
// uncompressed layer.
func (l *FileLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("open layer %s: %w", l.digest, err)
	}
	return f, nil
}

// Uncompressed opens the tar stream.
func (l *FileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := l.Compressed()
	if err != nil || !l.compressed {
		return f, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open layer %s: %w", l.digest, err)
	}
	return &gunzipReader{Reader: zr, f: f}, nil
}

// Close removes the layer's file. It is safe to call more than once.
func (l *FileLayer) Close() error {
	if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove layer file: %w", err)
	}
	return nil
}

type gunzipReader struct {
	*gzip.Reader
	f io.Closer
}

func (r *gunzipReader) Close() error {
	return errors.Join(r.Reader.Close(), r.f.Close())
}

// layerWriter is the single pass from tar entries to a compressed file:
// tar -> (sha256, count) -> pgzip -> (sha256, count) -> file; or, for an
// uncompressed layer, tar -> (sha256, count, buffered file).
type layerWriter struct {
	f      *os.File
	bw     *bufio.Writer // uncompressed only
	zw     *pgzip.Writer // compressed only
	tw     *tar.Writer
	uhash  *asyncHash
	chash  hash.Hash
	usize  countWriter
	csize  countWriter
	closed bool
}

// fileBuffer gathers an uncompressed layer's tar headers and small files
// into writes of this size; a larger write goes straight to the file.
const fileBuffer = 256 << 10

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// newLayerWriter creates the temporary file. The compressed bytes depend on
// the level and the block size only: pgzip cuts the stream into blocks of
// blockSize bytes, whatever the sizes of the writes, and compresses each with
// the previous block's tail as its dictionary. How many blocks it compresses
// at once (WithCompressionConcurrency, or GOMAXPROCS) changes the speed, not the output.
func newLayerWriter(o *layerOptions) (*layerWriter, error) {
	if !o.compressed() {
		f, err := os.CreateTemp(o.tempDir, "rootfs-layer-*.tar")
		if err != nil {
			return nil, fmt.Errorf("create layer file: %w", err)
		}
		w := &layerWriter{f: f, bw: bufio.NewWriterSize(f, fileBuffer), uhash: newAsyncHash(sha256.New())}
		w.tw = tar.NewWriter(io.MultiWriter(w.bw, w.uhash, &w.usize))
		return w, nil
	}
	f, err := os.CreateTemp(o.tempDir, "rootfs-layer-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("create layer file: %w", err)
	}
	w := &layerWriter{f: f, uhash: newAsyncHash(sha256.New()), chash: sha256.New()}
	zw, err := pgzip.NewWriterLevel(io.MultiWriter(f, w.chash, &w.csize), o.level)
	if err == nil {
		blocks := o.blocks
		if blocks == 0 {
			blocks = max(4, 2*runtime.GOMAXPROCS(0))
		}
		err = zw.SetConcurrency(blockSize, blocks)
	}
	if err != nil {
		w.abort()
		return nil, fmt.Errorf("gzip writer: %w", err)
	}
	w.zw = zw
	w.tw = tar.NewWriter(io.MultiWriter(zw, w.uhash, &w.usize))
	return w, nil
}

// finish closes the streams and returns the layer.
func (w *layerWriter) finish(mt types.MediaType) (*FileLayer, error) {
	err := w.tw.Close()
	if err == nil && w.zw != nil {
		err = w.zw.Close()
	}
	if err == nil && w.bw != nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Close()
	}
	w.closed = true
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.uhash.Sum())}
	if err != nil {
		_ = w.f.Close()
		_ = os.Remove(w.f.Name())
		return nil, fmt.Errorf("write layer: %w", err)
	}
	l := &FileLayer{path: w.f.Name(), digest: diffID, diffID: diffID, size: w.usize.n, mediaType: mt}
	if w.zw != nil {
		l.compressed = true
		l.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.chash.Sum(nil))}
		l.size = w.csize.n
	}
	return l, nil
}

// abort discards a layer that will not be finished.
func (w *layerWriter) abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.uhash.stop()
	if w.zw != nil {
		_ = w.zw.Close()
	}
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
}
