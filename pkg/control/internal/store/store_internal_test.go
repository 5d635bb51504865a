package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// TestTailHub: a followed job's tail keeps committed events in sequence,
// starts afresh at a gap or an append without its events, stays within its
// bounds, and answers only for ranges it holds entirely.
func TestTailHub(t *testing.T) {
	var h eventHub
	h.subs = map[string]map[chan struct{}]struct{}{"j": {make(chan struct{}, 1): {}}}
	evs := func(from, to int64) []controlapi.Event {
		var out []controlapi.Event
		for s := from; s <= to; s++ {
			out = append(out, controlapi.Event{Job: "j", Seq: s, Kind: controlapi.KindStdout, Data: json.RawMessage(`{"text":"x"}`)})
		}
		return out
	}
	h.extend("j", evs(5, 9))
	h.extend("unfollowed", evs(1, 3))
	if _, ok := h.fromTail("unfollowed", 0, 3, 10); ok {
		t.Fatal("a job no one follows has a tail")
	}
	h.extend("j", evs(10, 12))
	for _, c := range []struct {
		after, last int64
		limit       int
		want        string
	}{
		{4, 12, 100, "[5 6 7 8 9 10 11 12]"},
		{7, 12, 2, "[8 9]"},
		{9, 10, 100, "[10]"},
		{3, 12, 100, "miss"},  // 4 is not held
		{11, 13, 100, "miss"}, // 13 is not held
	} {
		got, ok := h.fromTail("j", c.after, c.last, c.limit)
		s := "miss"
		if ok {
			s = fmt.Sprint(seqs(got))
		}
		if s != c.want {
			t.Fatalf("after %d last %d limit %d: %s, want %s", c.after, c.last, c.limit, s, c.want)
		}
	}
	h.extend("j", evs(14, 15)) // a gap (13 appended elsewhere): afresh
	if _, ok := h.fromTail("j", 11, 12, 10); ok {
		t.Fatal("the tail kept events across a gap")
	}
	if got, ok := h.fromTail("j", 13, 15, 10); !ok || fmt.Sprint(seqs(got)) != "[14 15]" {
		t.Fatalf("after the gap: %v %v", got, ok)
	}
	h.extend("j", nil) // appended without its events: void
	if _, ok := h.fromTail("j", 13, 15, 10); ok {
		t.Fatal("the tail survived an append it could not see")
	}
	h.extend("j", evs(16, 16+2*tailEvents))
	got, ok := h.fromTail("j", 16+tailEvents, 16+tailEvents+1, 10)
	if !ok || len(got) != 1 {
		t.Fatalf("the newest events: %v %v", got, ok)
	}
	if _, ok := h.fromTail("j", 16, 17, 10); ok || len(h.tails["j"].evs) > tailEvents {
		t.Fatalf("the tail holds %d events, bound %d", len(h.tails["j"].evs), tailEvents)
	}
}

// TestTextOutputJSON: a text chunk's data is byte for byte what
// json.Marshal writes of its OutputData (HTML escapes, control bytes and
// the line separators included), whatever the text.
func TestTextOutputJSON(t *testing.T) {
	texts := []string{"plain", "line\n", "tab\tq\"b\\s/", "<&>\u2028\u2029", "é日本\U0001F600", "\x01\x1f\x7f", strings.Repeat("x", 4096)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(128)) // ASCII: every escape and the fast path
		}
		texts = append(texts, string(b))
	}
	for i, s := range texts {
		want := MustJSON(controlapi.OutputData{Command: i, Text: s})
		if got := TextOutputJSON(i, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("%q:\ngot  %s\nwant %s", s, got, want)
		}
	}
}

// TestPostgresPlaceholders: ? and +? (SQLite's unary plus that keeps a hot
// statement from being compiled again, see hotStmts) become $n; a plus
// with a space before ? is arithmetic and stays.
func TestPostgresPlaceholders(t *testing.T) {
	got := postgresDialect.q(`UPDATE t SET n = n + ? WHERE a = +? AND b = ? LIMIT +?`)
	if want := `UPDATE t SET n = n + $1 WHERE a = $2 AND b = $3 LIMIT $4`; got != want {
		t.Fatalf("q = %s, want %s", got, want)
	}
	if got := sqliteDialect.q(`a = +?`); got != `a = +?` {
		t.Fatalf("sqlite q = %s", got)
	}
}

func seqs(evs []controlapi.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
