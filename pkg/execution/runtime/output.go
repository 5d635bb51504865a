package runtime

import (
	"fmt"
	"strings"
)

// headTail keeps the head and the tail of one output stream within a
// bound: the first limit/2 bytes written and the last limit-limit/2, in a
// ring that older bytes leave as newer ones come. What falls between them
// is counted, not kept, so its memory never goes above limit bytes
// whatever is written.
type headTail struct {
	headCap, tailCap int
	head             []byte
	tail             []byte // a ring once full: its oldest byte is at start
	start            int
	total            int64
}

// newHeadTail keeps at most limit bytes (limit >= 0).
func newHeadTail(limit int64) *headTail {
	return &headTail{headCap: int(limit / 2), tailCap: int(limit - limit/2)}
}

// Write keeps what fits the head, then the rest in the tail's ring. It
// never fails.
func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	if room := h.headCap - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = grow(h.head, k, h.headCap)
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || h.tailCap == 0 {
		return n, nil
	}
	if len(p) >= h.tailCap {
		// p alone fills the ring: its last tailCap bytes are the tail
		h.tail = grow(h.tail[:0], h.tailCap, h.tailCap)[:h.tailCap]
		copy(h.tail, p[len(p)-h.tailCap:])
		h.start = 0
		return n, nil
	}
	if room := h.tailCap - len(h.tail); room > 0 {
		k := min(room, len(p))
		h.tail = grow(h.tail, k, h.tailCap)
		h.tail = append(h.tail, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite its oldest bytes
		k := copy(h.tail[h.start:], p)
		h.start = (h.start + k) % h.tailCap
		p = p[k:]
	}
	return n, nil
}

// grow makes room in b for k more bytes, never giving it a capacity above
// limit (append's own growth would).
func grow(b []byte, k, limit int) []byte {
	need := len(b) + k
	if need <= cap(b) {
		return b
	}
	c := min(max(2*cap(b), need, 4096), limit)
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// kept is the number of bytes kept.
func (h *headTail) kept() int { return len(h.head) + len(h.tail) }

// dropped is the number of bytes written but not kept.
func (h *headTail) dropped() int64 { return h.total - int64(h.kept()) }

// String is the head, then, when bytes were dropped, a line saying how
// many ("\n[... N bytes dropped ...]\n"), then the tail.
func (h *headTail) String() string {
	var b strings.Builder
	b.Grow(h.kept() + 40)
	b.Write(h.head)
	if d := h.dropped(); d > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes dropped ...]\n", d)
	}
	b.Write(h.tail[h.start:])
	b.Write(h.tail[:h.start])
	return b.String()
}
