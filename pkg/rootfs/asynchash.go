package rootfs

import (
	"hash"
	"sync"
)

// asyncHash feeds a hash on its own goroutine: the writer pays a copy, not
// the hash. On a two-core machine, taking sha256 of the uncompressed stream
// off the goroutine that reads files and writes tar is what lets reading,
// hashing and compressing overlap. Writes are batched into chunkSize buffers.
type asyncHash struct {
	h    hash.Hash
	ch   chan []byte
	done chan struct{}
	buf  []byte
	free chan []byte // recycled chunks
	once sync.Once
}

const asyncChunk = 256 << 10

func newAsyncHash(h hash.Hash) *asyncHash {
	a := &asyncHash{h: h, ch: make(chan []byte, 8), done: make(chan struct{}), free: make(chan []byte, 10)}
	a.buf = a.chunk()
	go func() {
		defer close(a.done)
		for b := range a.ch {
			a.h.Write(b)
			select {
			case a.free <- b[:0]:
			default:
			}
		}
	}()
	return a
}

// Write never fails.
func (a *asyncHash) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), asyncChunk-len(a.buf))
		a.buf = append(a.buf, p[:k]...)
		p = p[k:]
		if len(a.buf) == asyncChunk {
			a.ch <- a.buf
			a.buf = a.chunk()
		}
	}
	return n, nil
}

// Sum flushes, waits for the hashing goroutine and returns the digest.
func (a *asyncHash) Sum() []byte {
	a.stop()
	return a.h.Sum(nil)
}

// stop ends the goroutine; safe to call more than once.
func (a *asyncHash) stop() {
	a.once.Do(func() {
		if len(a.buf) > 0 {
			a.ch <- a.buf
		}
		close(a.ch)
	})
	<-a.done
}

func (a *asyncHash) chunk() []byte {
	select {
	case b := <-a.free:
		return b
	default:
		return make([]byte, 0, asyncChunk)
	}
}
