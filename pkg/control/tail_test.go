package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestTailReads: with the job followed, every read (each resume point,
// batch limits, while retention trims) returns what a read of the store
// alone returns.
func TestTailReads(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{MaxBytesPerJob: 3000})
		j := submitJob(t, f.p, "globex")
		_, unsubscribe := s.subscribe(j.ID)
		defer unsubscribe()
		check := func() {
			t.Helper()
			h, _, err := s.readEventsTx(ctx, j.ID, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			for after := int64(0); after <= h.Last; after++ {
				for _, limit := range []int{1, 3, 1000} {
					h1, got, err1 := s.readEvents(ctx, j.ID, after, limit)
					h2, want, err2 := s.readEventsTx(ctx, j.ID, after, limit)
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					if h1 != h2 || fmt.Sprintf("%v", got) != fmt.Sprintf("%v", want) {
						t.Fatalf("after %d limit %d: %+v %v, the store has %+v %v", after, limit, h1, seqs(got), h2, seqs(want))
					}
				}
			}
		}
		for i := range 40 {
			var batch []NewEvent
			for k := range i%5 + 1 {
				batch = append(batch, outEvent(controlapi.KindStdout, fmt.Sprintf("%03d.%d %040d\n", i, k, 0)))
			}
			if _, err := s.AppendEvents(ctx, j.ID, batch); err != nil {
				t.Fatal(err)
			}
			if i%7 == 0 {
				check()
			}
		}
		check()
	})
}

// TestSSETailUnderTrim: a follower reading live while retention trims the
// stream at every append gets each event as the store has it (the same
// data at the same sequence), in order, with a gap event wherever it lost
// some to retention, and the result at the end.
func TestSSETailUnderTrim(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{MaxBytesPerJob: 2000})
		j := submitJob(t, f.p, "globex")
		type got struct {
			evs  []controlapi.Event
			gaps []controlapi.TrimmedData
			err  error
		}
		done := make(chan got, 1)
		ready := make(chan struct{})
		go func() {
			var g got
			fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			first := true
			g.err = f.globex.Follow(fctx, j.ID, controlapi.FollowOptions{OnGap: func(d controlapi.TrimmedData) { g.gaps = append(g.gaps, d) }}, func(e controlapi.Event) error {
				if first {
					first = false
					close(ready)
				}
				g.evs = append(g.evs, e)
				return nil
			})
			done <- g
		}()
		<-ready
		want := map[int64]string{}
		for i := range 300 {
			text := fmt.Sprintf("%03d %040d\n", i, 0)
			last, err := s.AppendEvents(ctx, j.ID, []NewEvent{outEvent(controlapi.KindStdout, text)})
			if err != nil {
				t.Fatal(err)
			}
			want[last] = text
		}
		if _, err := f.p.Cancel(ctx, "globex", j.ID); err != nil {
			t.Fatal(err)
		}
		g := <-done
		if g.err != nil {
			t.Fatal(g.err)
		}
		var prev int64
		for _, e := range g.evs {
			if e.Seq <= prev {
				t.Fatalf("sequence %d after %d", e.Seq, prev)
			}
			if e.Seq != prev+1 && prev > 0 {
				lost := false
				for _, gp := range g.gaps {
					lost = lost || (gp.After < e.Seq && gp.TrimmedThrough >= prev+1)
				}
				if !lost {
					t.Fatalf("events %d to %d missing with no gap event (gaps %+v)", prev+1, e.Seq-1, g.gaps)
				}
			}
			prev = e.Seq
			if text, ok := want[e.Seq]; ok {
				var d controlapi.OutputData
				if err := json.Unmarshal(e.Data, &d); err != nil || d.Text != text {
					t.Fatalf("event %d: %s, want %q", e.Seq, e.Data, text)
				}
			}
		}
		if n := len(g.evs); n == 0 || g.evs[n-1].Kind != controlapi.KindResult {
			t.Fatalf("the stream did not end with its result: %d events", n)
		}
	})
}

// TestAppendEventJSON: an event's SSE data says what json.Marshal's says
// (the same JSON value), on one line, whatever its data's layout.
func TestAppendEventJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 4005, time.UTC)
	for _, e := range []controlapi.Event{
		{Job: "j-1", Seq: 7, At: at, Kind: controlapi.KindStdout, Data: json.RawMessage(`{"command":0,"text":"a<b>&c\u2028\n"}`)},
		{Job: "j\"2", Seq: 1 << 40, At: at.Add(time.Hour), Kind: controlapi.KindStatus, Data: json.RawMessage("{\n  \"a\": [1,\r\n 2]\n}")},
		{Job: "j", Seq: 1, At: time.Unix(0, 0).UTC(), Kind: controlapi.KindResult, Data: json.RawMessage(`{}`)},
	} {
		want := mustJSON(e)
		got := appendEventJSON(nil, e)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) || bytes.ContainsAny(got, "\r\n") {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}

// TestDecodeEvent: the client reads what appendEventJSON writes as
// encoding/json reads it, and anything else the server might send (fields
// in another order, escaped strings) through encoding/json.
func TestDecodeEvent(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 4005, time.FixedZone("x", 3600))
	for _, e := range []controlapi.Event{
		{Job: "j-1", Seq: 7, At: at, Kind: controlapi.KindStdout, Data: json.RawMessage(`{"command":0,"text":"a<b>&c\u2028\n"}`)},
		{Job: "j\"2", Seq: 1 << 40, At: at.Add(time.Hour), Kind: controlapi.KindStatus, Data: json.RawMessage("{\n  \"a\": [1,\r\n 2]\n}")},
		{Job: "j", Seq: 1, At: time.Unix(0, 0).UTC(), Kind: controlapi.KindResult, Data: json.RawMessage(`{}`)},
		{Job: "j\u00e9", Seq: 2, At: at, Kind: controlapi.KindState, Data: json.RawMessage(`{"state":"running","x":{"y":{}}}`)},
	} {
		for _, line := range [][]byte{appendEventJSON(nil, e), mustJSON(e), []byte(`{"seq":` + strconv.FormatInt(e.Seq, 10) + `,"data":` + string(mustJSON(e.Data)) + `,"job":` + string(mustJSON(e.Job)) + `,"kind":"` + string(e.Kind) + `","at":"` + e.At.Format(time.RFC3339Nano) + `"}`)} {
			var want controlapi.Event
			if err := json.Unmarshal(line, &want); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			got, err := controlapi.DecodeEvent(line)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			var gd, wd any
			if err := json.Unmarshal(got.Data, &gd); err != nil {
				t.Fatalf("%s: data %s: %v", line, got.Data, err)
			}
			_ = json.Unmarshal(want.Data, &wd)
			if got.Job != want.Job || got.Seq != want.Seq || !got.At.Equal(want.At) || got.Kind != want.Kind || !reflect.DeepEqual(gd, wd) {
				t.Fatalf("%s:\ngot  %+v\nwant %+v", line, got, want)
			}
		}
	}
	for _, bad := range []string{`{"job":"j","seq":x}`, `{"job":"j","seq":1,"at":"now","kind":"stdout","data":{}}`, `{`} {
		if _, err := controlapi.DecodeEvent([]byte(bad)); err == nil {
			t.Fatalf("%s: read without an error", bad)
		}
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
		want := mustJSON(controlapi.OutputData{Command: i, Text: s})
		if got := textOutputJSON(i, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("%q:\ngot  %s\nwant %s", s, got, want)
		}
	}
}
