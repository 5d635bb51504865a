package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
)

// TestTailReads: with the job followed, every read (each resume point,
// batch limits, while retention trims) returns what a read of the store
// alone returns.
func TestTailReads(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newSSEFixture(t, s, EventConfig{MaxBytesPerJob: 3000})
		j := submitJob(t, f.p, "globex")
		_, unsubscribe := s.inner.Subscribe(j.ID)
		defer unsubscribe()
		check := func() {
			t.Helper()
			h, _, err := s.inner.ReadEventsTx(ctx, j.ID, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			for after := int64(0); after <= h.Last; after++ {
				for _, limit := range []int{1, 3, 1000} {
					h1, got, err1 := s.inner.ReadEvents(ctx, j.ID, after, limit)
					h2, want, err2 := s.inner.ReadEventsTx(ctx, j.ID, after, limit)
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
			var batch []store.NewEvent
			for k := range i%5 + 1 {
				batch = append(batch, outEvent(controlapi.KindStdout, fmt.Sprintf("%03d.%d %040d\n", i, k, 0)))
			}
			if _, err := s.inner.AppendEvents(ctx, j.ID, batch); err != nil {
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
			last, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, text)})
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
		want := store.MustJSON(e)
		got := stream.AppendEventJSON(nil, e)
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
		for _, line := range [][]byte{stream.AppendEventJSON(nil, e), store.MustJSON(e), []byte(`{"seq":` + strconv.FormatInt(e.Seq, 10) + `,"data":` + string(store.MustJSON(e.Data)) + `,"job":` + string(store.MustJSON(e.Job)) + `,"kind":"` + string(e.Kind) + `","at":"` + e.At.Format(time.RFC3339Nano) + `"}`)} {
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
