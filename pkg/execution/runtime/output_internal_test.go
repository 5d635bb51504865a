package runtime

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// headTail keeps exactly the first half and the last half of what was
// written, says how much it dropped, and never holds more than its bound,
// whatever the sizes of the writes.
func TestHeadTailBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int64{0, 1, 2, 7, 100, 4096, 100000} {
		for round := range 20 {
			h := newHeadTail(limit)
			var all bytes.Buffer
			writes := rng.IntN(50)
			for range writes {
				p := make([]byte, rng.IntN(int(3*limit)+10))
				for i := range p {
					p[i] = byte('a' + rng.IntN(26))
				}
				if n, err := h.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				all.Write(p)
				if c := int64(cap(h.head) + cap(h.tail)); c > limit {
					t.Fatalf("limit %d: holds %d bytes of capacity", limit, c)
				}
			}
			b := all.Bytes()
			head := b[:min(len(b), int(limit/2))]
			tail := b[len(head):]
			tail = tail[max(0, len(tail)-int(limit-limit/2)):]
			dropped := len(b) - len(head) - len(tail)
			want := string(head) + string(tail)
			if dropped > 0 {
				want = string(head) + fmt.Sprintf("\n[... %d bytes dropped ...]\n", dropped) + string(tail)
			}
			if got := h.String(); got != want || h.dropped() != int64(dropped) {
				t.Fatalf("limit %d round %d (%d bytes in %d writes): dropped %d, want %d; kept %q, want %q",
					limit, round, len(b), writes, h.dropped(), dropped, clip(got), clip(want))
			}
		}
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:100] + "..." + s[len(s)-100:]
	}
	return s
}

// A command's 10 MB through a 1 MB bound: memory stays at the bound.
func TestHeadTailLargeOutput(t *testing.T) {
	h := newHeadTail(1 << 20)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB, as the runner's frames
	h.Write([]byte("BEGIN\n"))
	for range 320 {
		h.Write(chunk)
	}
	h.Write([]byte("END\n"))
	if c := cap(h.head) + cap(h.tail); c > 1<<20 {
		t.Fatalf("holds %d bytes of capacity, bound %d", c, 1<<20)
	}
	s := h.String()
	if !bytes.HasPrefix([]byte(s), []byte("BEGIN\n")) || !bytes.HasSuffix([]byte(s), []byte("END\n")) {
		t.Errorf("head or tail lost: %q", clip(s))
	}
	if want := int64(6+320*len(chunk)+4) - 1<<20; h.dropped() != want {
		t.Errorf("dropped %d, want %d", h.dropped(), want)
	}
}
