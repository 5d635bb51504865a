package stream

import (
	"bytes"
	"fmt"
)

// Bounded keeps a job's output within a byte and a line bound: the
// first half of each bound as the head, the last half as the tail, and
// counts what it dropped between them. Memory never exceeds the bounds,
// whatever is written.
type Bounded struct {
	maxBytes, maxLines int64
	head               []byte
	headLines          int64
	headFull           bool
	tail               [][]byte // complete or partial lines, oldest first
	tailBytes          int64
	DroppedBytes       int64
	DroppedLines       int64
}

// NewBounded keeps at most maxBytes and maxLines (at least 2 of each).
func NewBounded(maxBytes, maxLines int64) *Bounded {
	if maxBytes < 2 {
		maxBytes = 2
	}
	if maxLines < 2 {
		maxLines = 2
	}
	return &Bounded{maxBytes: maxBytes, maxLines: maxLines}
}

// Write keeps what fits; it never fails.
func (o *Bounded) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !o.headFull {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line = p[:i+1]
		}
		room := o.maxBytes/2 - int64(len(o.head))
		if room <= 0 || o.headLines >= o.maxLines/2 {
			o.headFull = true
			break
		}
		if int64(len(line)) > room {
			line = line[:room]
		}
		o.head = append(o.head, line...)
		if line[len(line)-1] == '\n' {
			o.headLines++
		}
		p = p[len(line):]
	}
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line = p[:i+1]
		}
		p = p[len(line):]
		// continue a partial last line, or start a new one
		if k := len(o.tail); k > 0 && o.tail[k-1][len(o.tail[k-1])-1] != '\n' {
			o.tail[k-1] = append(o.tail[k-1], line...)
		} else {
			o.tail = append(o.tail, append([]byte(nil), line...))
		}
		o.tailBytes += int64(len(line))
		o.trim()
	}
	return n, nil
}

// trim drops the oldest tail lines (or the front of a single long one)
// until the tail fits half of each bound.
func (o *Bounded) trim() {
	for int64(len(o.tail)) > o.maxLines/2 || (o.tailBytes > o.maxBytes/2 && len(o.tail) > 1) {
		o.DroppedBytes += int64(len(o.tail[0]))
		o.DroppedLines++
		o.tailBytes -= int64(len(o.tail[0]))
		o.tail[0] = nil
		o.tail = o.tail[1:]
	}
	if len(o.tail) == 1 && o.tailBytes > o.maxBytes/2 {
		cut := o.tailBytes - o.maxBytes/2
		o.DroppedBytes += cut
		o.tail[0] = append([]byte(nil), o.tail[0][cut:]...)
		o.tailBytes -= cut
	}
}

// String is the head, a marker where bytes or lines were dropped, and the
// tail.
func (o *Bounded) String() string {
	var b bytes.Buffer
	b.Write(o.head)
	if o.DroppedBytes > 0 || o.DroppedLines > 0 {
		if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[... %d bytes, %d lines dropped ...]\n", o.DroppedBytes, o.DroppedLines)
	}
	for _, l := range o.tail {
		b.Write(l)
	}
	return b.String()
}
