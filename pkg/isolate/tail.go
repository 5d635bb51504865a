package isolate

import "sync"

// tailBuffer is an io.Writer that keeps the last max bytes written to it in
// a ring, so a command that floods its output costs bounded memory.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte // grows up to max, then wraps
	next  int    // where the next byte goes once len(buf) == max
	total int64  // bytes written in all
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	t.total += int64(n)
	if t.max <= 0 {
		return n, nil
	}
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	if room := t.max - len(t.buf); room > 0 {
		k := min(room, len(p))
		t.buf = append(t.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(t.buf[t.next:], p)
		p = p[k:]
		t.next = (t.next + k) % t.max
	}
	return n, nil
}

// Bytes returns a copy of the kept tail and whether earlier bytes were
// dropped.
func (t *tailBuffer) Bytes() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.next:]...)
	out = append(out, t.buf[:t.next]...)
	return out, t.total > int64(len(out))
}
