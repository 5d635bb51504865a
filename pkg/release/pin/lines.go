package pin

import (
	"bytes"
	"sort"
	"unicode/utf8"
)

// lineIndex maps the 1-based line and column that the YAML parser reports to
// byte offsets in the file, and back. It mirrors the parser: a column counts
// characters (runes), not bytes; a line ends at CR LF, CR, LF, NEL, LS or PS;
// a UTF-8 byte order mark at the start of the file is not counted.
type lineIndex struct {
	data   []byte
	starts []int // byte offset of the first byte of each line
	bom    int   // length of a leading byte order mark
}

const bomUTF8 = "\xef\xbb\xbf"

func newLineIndex(data []byte) *lineIndex {
	x := &lineIndex{data: data, starts: make([]int, 1, bytes.Count(data, []byte{'\n'})+2)}
	if len(data) >= 3 && string(data[:3]) == bomUTF8 {
		x.bom = 3
	}
	if bytes.IndexByte(data, '\r') < 0 && bytes.IndexByte(data, 0xC2) < 0 && bytes.IndexByte(data, 0xE2) < 0 {
		// Only LF breaks the lines (no CR, NEL, LS or PS): find them fast.
		for i := 0; ; {
			j := bytes.IndexByte(data[i:], '\n')
			if j < 0 {
				return x
			}
			i += j + 1
			x.starts = append(x.starts, i)
		}
	}
	for i := 0; i < len(data); {
		if n := breakLen(data, i); n > 0 {
			i += n
			x.starts = append(x.starts, i)
			continue
		}
		i++
	}
	return x
}

// breakLen is the length in bytes of the line break at data[i], 0 if none.
func breakLen(data []byte, i int) int {
	switch b := data[i]; {
	case b == '\r':
		if i+1 < len(data) && data[i+1] == '\n' {
			return 2
		}
		return 1
	case b == '\n':
		return 1
	case b == 0xC2 && i+1 < len(data) && data[i+1] == 0x85:
		return 2
	case b == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
		return 3
	}
	return 0
}

// offset is the byte offset of line:col, false when there is no such position.
func (x *lineIndex) offset(line, col int) (int, bool) {
	if line < 1 || line > len(x.starts) || col < 1 {
		return 0, false
	}
	off := x.starts[line-1]
	if line == 1 {
		off += x.bom
	}
	for c := 1; c < col; c++ {
		if off >= len(x.data) || breakLen(x.data, off) > 0 {
			return 0, false
		}
		_, w := utf8.DecodeRune(x.data[off:])
		off += w
	}
	return off, true
}

// position is the 1-based line and column of a byte offset.
func (x *lineIndex) position(off int) (line, col int) {
	line = sort.Search(len(x.starts), func(i int) bool { return x.starts[i] > off })
	start := x.starts[line-1]
	if line == 1 {
		start = min(start+x.bom, off)
	}
	return line, utf8.RuneCount(x.data[start:off]) + 1
}

// lineEnd is the offset of the line break that ends the line holding off, or
// the end of the file.
func (x *lineIndex) lineEnd(off int) int {
	for ; off < len(x.data); off++ {
		if breakLen(x.data, off) > 0 {
			return off
		}
	}
	return off
}
