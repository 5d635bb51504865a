package rootfs

import (
	stdgzip "compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/pgzip"
	"golang.org/x/sys/unix"
)

// benchTree writes a generated tree from a fixed seed: 20,000 files and about
// 300 MB (BENCH_SMOKE=1: 400 files, about 5 MB), each file half random bytes
// and half text, in directories 3 levels deep. It returns the content bytes.
func benchTree(b *testing.B) (string, int64) {
	b.Helper()
	files, total := 20_000, int64(300<<20)
	if os.Getenv("BENCH_SMOKE") != "" {
		files, total = 400, 5<<20
	}
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(2024, 5))
	const text = "the quick brown fox jumps over the lazy dog; package main; func main() {}\n"
	mean := total / int64(files)
	var written int64
	buf := make([]byte, 2*mean)
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("p%02d", i%50), fmt.Sprintf("q%02d", i/50%20))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		n := int(rng.Uint64() % uint64(2*mean))
		half := n / 2
		for j := 0; j < half; j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && j+k < half; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		for j := half; j < n; j++ {
			buf[j] = text[j%len(text)]
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), buf[:n], 0o644); err != nil {
			b.Fatal(err)
		}
		written += int64(n)
	}
	syncfs(dir)
	return dir, written
}

// syncfs flushes dir's filesystem, so that a benchmark measures its own
// work and not the writeback of what came before it.
func syncfs(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Syncfs(fd)
		_ = unix.Close(fd)
	}
}

// BenchmarkLayer freezes a generated tree into one layer (walk, tar, pgzip,
// both digests, file), at the package's level and, for comparison, at
// gzip.BestSpeed and uncompressed (walk, tar, one digest, file). MB/s is of
// file content.
func BenchmarkLayer(b *testing.B) {
	dir, size := benchTree(b)
	for _, c := range []struct {
		name string
		opt  LayerOption
	}{
		{fmt.Sprintf("level=%d", compressionLevel), withCompressionLevel(compressionLevel)},
		{"level=1", withCompressionLevel(1)},
		{"uncompressed", WithMediaType(types.OCIUncompressedLayer)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			var rep *DiffReport
			for b.Loop() {
				b.StopTimer()
				syncfs(dir)
				b.StartTimer()
				l, r, err := Layer(context.Background(), dir, c.opt, WithTempDir(b.TempDir()))
				if err != nil {
					b.Fatal(err)
				}
				rep = r
				_ = l.(*FileLayer).Close()
			}
			b.ReportMetric(float64(rep.Size)/float64(rep.UncompressedSize), "ratio")
		})
	}
}

// BenchmarkExtract unpacks the layer of the same tree into a fresh directory.
func BenchmarkExtract(b *testing.B) {
	dir, size := benchTree(b)
	l, _, err := Layer(context.Background(), dir, WithTempDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer l.(*FileLayer).Close()
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		dst := filepath.Join(b.TempDir(), "root")
		syncfs(dir)
		b.StartTimer()
		if _, err := ExtractLayers(context.Background(), []v1.Layer{l}, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompressors compares the gzip writers this package could use on
// the same half-random bytes (64 MB; BENCH_SMOKE=1: 4 MB), in memory: the
// standard library, klauspost/compress (one core), and pgzip (all cores, the
// package's block size).
func BenchmarkCompressors(b *testing.B) {
	size := 64 << 20
	if os.Getenv("BENCH_SMOKE") != "" {
		size = 4 << 20
	}
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(2024, 6))
	const text = "the quick brown fox jumps over the lazy dog; package main; func main() {}\n"
	for off := 0; off < size; off += 64 << 10 {
		for j := off; j < min(off+64<<10, size); j++ {
			if off/(64<<10)%2 == 0 {
				data[j] = byte(rng.Uint64())
			} else {
				data[j] = text[j%len(text)]
			}
		}
	}
	writers := map[string]func(io.Writer, int) (io.WriteCloser, error){
		"stdlib":    func(w io.Writer, l int) (io.WriteCloser, error) { return stdgzip.NewWriterLevel(w, l) },
		"klauspost": func(w io.Writer, l int) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, l) },
		"pgzip": func(w io.Writer, l int) (io.WriteCloser, error) {
			z, err := pgzip.NewWriterLevel(w, l)
			if err == nil {
				err = z.SetConcurrency(blockSize, max(2, runtime.GOMAXPROCS(0)))
			}
			return z, err
		},
	}
	for _, name := range []string{"stdlib", "klauspost", "pgzip"} {
		for _, level := range []int{1, 6} {
			b.Run(fmt.Sprintf("%s/level=%d", name, level), func(b *testing.B) {
				b.SetBytes(int64(size))
				var out countWriter
				for b.Loop() {
					out = countWriter{}
					z, err := writers[name](&out, level)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := z.Write(data); err != nil {
						b.Fatal(err)
					}
					if err := z.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(out.n)/float64(size), "ratio")
			})
		}
	}
}
