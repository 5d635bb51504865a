package pin

import (
	"slices"
	"testing"
)

// TestLineIndexStarts checks the fast path for files broken by LF alone
// against the general scan of every break YAML knows.
func TestLineIndexStarts(t *testing.T) {
	for _, data := range []string{
		"", "a", "\n", "a\n", "a\nb", "a\n\nb\n", "\xef\xbb\xbfa: 1\nb: 2\n",
		"a\r\nb\rc\n", "a\xc2\x85b", "a\xe2\x80\xa8b\xe2\x80\xa9c", "é\nü\n", "a\xc2\xa0b\nc",
	} {
		var want []int
		want = append(want, 0)
		for i := 0; i < len(data); {
			if n := breakLen([]byte(data), i); n > 0 {
				i += n
				want = append(want, i)
				continue
			}
			i++
		}
		if got := newLineIndex([]byte(data)).starts; !slices.Equal(got, want) {
			t.Errorf("%q: starts %v, want %v", data, got, want)
		}
	}
}
