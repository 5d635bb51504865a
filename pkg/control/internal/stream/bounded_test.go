package stream

import (
	"strings"
	"testing"
)

func TestBoundedOutput(t *testing.T) {
	o := NewBounded(100, 10)
	for i := range 1000 {
		o.Write([]byte(strings.Repeat("x", i%7) + "\n"))
	}
	o.Write([]byte("the end\n"))
	s := o.String()
	if len(s) > 100+64 || !strings.HasSuffix(s, "the end\n") || !strings.Contains(s, "lines dropped ...]") {
		t.Fatalf("bounded output (%d bytes):\n%s", len(s), s)
	}
	o = NewBounded(100, 10)
	o.Write([]byte("start\n"))
	o.Write([]byte(strings.Repeat("y", 1<<20) + "tail"))
	s = o.String()
	if len(s) > 100+64 || !strings.HasPrefix(s, "start\n") || !strings.HasSuffix(s, "ytail") || o.DroppedBytes < 1<<19 {
		t.Fatalf("one long line (%d bytes, %d dropped):\n%s", len(s), o.DroppedBytes, s)
	}
}
