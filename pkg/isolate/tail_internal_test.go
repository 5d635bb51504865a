package isolate

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{"empty", 4, nil, "", false},
		{"fits", 4, []string{"ab", "c"}, "abc", false},
		{"exactly fits", 4, []string{"ab", "cd"}, "abcd", false},
		{"wraps", 4, []string{"abc", "def"}, "cdef", true},
		{"one write longer than max", 4, []string{"abcdefgh"}, "efgh", true},
		{"many small writes", 3, []string{"a", "b", "c", "d", "e"}, "cde", true},
		{"zero max keeps nothing", 0, []string{"abc"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTailBuffer(tc.max)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, truncated := b.Bytes()
			if string(got) != tc.want || truncated != tc.truncated {
				t.Errorf("Bytes = %q, %v; want %q, %v", got, truncated, tc.want, tc.truncated)
			}
		})
	}
}

// TestTailBufferRandom compares the ring with keeping everything and
// slicing, over random write sizes from a fixed seed.
func TestTailBufferRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		max := 1 + r.IntN(64)
		b := newTailBuffer(max)
		var all []byte
		for range r.IntN(20) {
			p := make([]byte, r.IntN(100))
			for i := range p {
				p[i] = byte('a' + r.IntN(26))
			}
			_, _ = b.Write(p)
			all = append(all, p...)
		}
		want := all[len(all)-min(len(all), max):]
		got, truncated := b.Bytes()
		if !bytes.Equal(got, want) || truncated != (len(all) > max) {
			t.Fatalf("max %d: Bytes = %q, %v; want %q", max, got, truncated, want)
		}
	}
}

func TestReadStat(t *testing.T) {
	t.Parallel()
	start, state, err := readStat(os.Getpid())
	if err != nil || start == 0 || state != 'R' && state != 'S' {
		t.Fatalf("readStat(self) = %d, %c, %v", start, state, err)
	}
	ref, ok := refOf(os.Getpid())
	if !ok || !ref.alive() {
		t.Fatal("self is not alive")
	}
	if (procRef{pid: ref.pid, start: ref.start + 1}).alive() {
		t.Error("a reused pid counts as the same process")
	}
	if _, ok := refOf(1 << 30); ok {
		t.Error("an absent pid is alive")
	}
}
