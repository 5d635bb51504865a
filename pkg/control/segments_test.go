package control

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// TestEventSegments: one append of many events of mixed kinds is stored
// as segments (output apart from the rest, at most maxSegmentEvents each)
// and read back from the store, not the tail, from every point and in
// batches of every size; size retention trims whole output segments and
// keeps the other kinds.
func TestEventSegments(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{MaxBytesPerJob: 1 << 30})
		j := submitJob(t, p, "globex")
		var evs []store.NewEvent
		for i := range 300 {
			switch {
			case i == 150:
				evs = append(evs, store.NewEvent{Kind: controlapi.KindToolCall, Data: json.RawMessage("{\n \"tool\": \"grep\"\n}")})
			case i < 150:
				evs = append(evs, outEvent(controlapi.KindStdout, fmt.Sprintf("out %d\n", i)))
			default:
				evs = append(evs, outEvent(controlapi.KindStderr, fmt.Sprintf("err %d é", i)))
			}
		}
		last, err := s.inner.AppendEvents(ctx, j.ID, evs)
		if err != nil || last != 301 { // seq 1 is the job's first state event
			t.Fatalf("AppendEvents = %d, %v", last, err)
		}
		var segs int
		if err := s.inner.ReadDB().QueryRowContext(ctx, s.inner.Q(`SELECT COUNT(*) FROM cp_event_segments WHERE job_id = ?`), j.ID).Scan(&segs); err != nil || segs != 1+2+1+2 {
			t.Fatalf("%d segments (%v), want 6: the state event, stdout 128+22, the tool call, stderr 128+21", segs, err)
		}
		want := func(seq int64) (controlapi.EventKind, string) {
			e := evs[seq-2]
			if e.Kind == controlapi.KindToolCall {
				return e.Kind, `{"tool":"grep"}` // compacted when appended
			}
			return e.Kind, string(e.Data)
		}
		for _, limit := range []int{1, 7, 128, 500} {
			for after := int64(0); after <= 301; after++ {
				h, got, err := s.inner.ReadEventsTx(ctx, j.ID, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				n := min(int64(limit), 301-after)
				if h.Last != 301 || int64(len(got)) != n {
					t.Fatalf("after %d limit %d: head %+v, %d events, want %d", after, limit, h, len(got), n)
				}
				for k, e := range got {
					seq := after + 1 + int64(k)
					if e.Seq != seq || e.Job != j.ID {
						t.Fatalf("after %d limit %d: event %d is %d", after, limit, k, e.Seq)
					}
					if seq == 1 {
						continue
					}
					if kind, data := want(seq); e.Kind != kind || string(e.Data) != data {
						t.Fatalf("event %d: %s %s, want %s %s", seq, e.Kind, e.Data, kind, data)
					}
				}
			}
		}
		// size retention: the output before the tool call goes, the tool
		// call and the state event stay
		s.inner.SetEventConfig(EventConfig{MaxBytesPerJob: 6000})
		if _, err := s.inner.AppendEvents(ctx, j.ID, []store.NewEvent{outEvent(controlapi.KindStdout, "more")}); err != nil {
			t.Fatal(err)
		}
		h, got, err := s.inner.ReadEventsTx(ctx, j.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if h.TrimmedThrough < 151 || got[0].Seq != 1 || got[1].Seq != 152 || got[1].Kind != controlapi.KindToolCall {
			t.Fatalf("after trimming: head %+v, events from %d %s, %d %s", h, got[0].Seq, got[0].Kind, got[1].Seq, got[1].Kind)
		}
		var size int64
		for _, e := range got {
			if store.Trimmable(e.Kind) {
				size += int64(len(e.Data))
			}
		}
		if size > 6000 {
			t.Fatalf("%d bytes of output kept, want at most 6000", size)
		}
	})
}

// TestEventRowsMigrated: a store written before segments (one cp_events
// row per event) is opened with every event readable, data that spanned
// lines compacted, the sequence continuing, and the old table gone.
func TestEventRowsMigrated(t *testing.T) {
	old := []string{
		`CREATE TABLE cp_event_heads (job_id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL DEFAULT 0,
			output_bytes BIGINT NOT NULL DEFAULT 0, trimmed_through BIGINT NOT NULL DEFAULT 0, ended INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE cp_events (job_id TEXT NOT NULL, seq BIGINT NOT NULL, at_ns BIGINT NOT NULL,
			kind TEXT NOT NULL, data TEXT NOT NULL, size BIGINT NOT NULL, PRIMARY KEY (job_id, seq))`,
		`INSERT INTO cp_event_heads (job_id, last_seq, output_bytes) VALUES ('j-old', 3, 20)`,
		`INSERT INTO cp_events VALUES ('j-old', 1, 1000, 'state', '{"state":"running"}', 19)`,
		"INSERT INTO cp_events VALUES ('j-old', 2, 2000, 'stdout', '{\"command\":0,\"text\":\"hi\\n\"}', 25)",
		"INSERT INTO cp_events VALUES ('j-old', 3, 3000, 'tool_call', '{\n  \"tool\": \"ls\"\n}', 20)",
	}
	check := func(t *testing.T, s *Store) {
		ctx := context.Background()
		h, evs, err := s.inner.ReadEventsTx(ctx, "j-old", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if h.Last != 3 || len(evs) != 3 {
			t.Fatalf("head %+v, %d events", h, len(evs))
		}
		for i, w := range []struct {
			kind controlapi.EventKind
			at   int64
			data any
		}{{controlapi.KindState, 1000, map[string]any{"state": "running"}}, {controlapi.KindStdout, 2000, map[string]any{"command": 0.0, "text": "hi\n"}}, {controlapi.KindToolCall, 3000, map[string]any{"tool": "ls"}}} {
			var d any
			if err := json.Unmarshal(evs[i].Data, &d); err != nil || evs[i].Kind != w.kind || evs[i].At.UnixNano() != w.at || !reflect.DeepEqual(d, w.data) {
				t.Fatalf("event %d: %s %s at %d (%v)", i+1, evs[i].Kind, evs[i].Data, evs[i].At.UnixNano(), err)
			}
		}
		if last, err := s.inner.AppendEvents(ctx, "j-old", []store.NewEvent{outEvent(controlapi.KindStdout, "new")}); err != nil || last != 4 {
			t.Fatalf("append after the migration = %d, %v", last, err)
		}
		var n int
		if err := s.inner.ReadDB().QueryRowContext(ctx, s.inner.Q(`SELECT COUNT(*) FROM cp_event_segments WHERE job_id = ?`), "j-old").Scan(&n); err != nil || n != 4 {
			t.Fatalf("%d segments, %v", n, err)
		}
		if _, err := s.inner.ReadDB().ExecContext(ctx, `SELECT 1 FROM cp_events`); err == nil {
			t.Fatal("cp_events is still there")
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "control.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range old {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		s, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: no PostgreSQL")
		}
		dsn := pgtest.New(t)
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["search_path"] = Schema
		db := stdlib.OpenDB(*cfg)
		if _, err := db.Exec("CREATE SCHEMA " + Schema); err != nil {
			t.Fatal(err)
		}
		for _, q := range old {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		s, err := OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, s)
	})
}

// TestOutputStreamsInOrder: many jobs' output streams written flat out at
// once, with a small in-flight budget (a writer queues its own append
// while its stream's appender commits another: two appends of one stream
// in flight, often in one group commit), store every byte once, in the
// order written, as events of at most ChunkBytes.
func TestOutputStreamsInOrder(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := eventPlane(t, s, repo, EventConfig{ChunkBytes: 64, InFlightBytes: 4 << 10})
		var streams atomic.Int64
		const jobs, lines = 6, 400
		var wg sync.WaitGroup
		ids := make([]string, jobs)
		for k := range jobs {
			j := submitJob(t, p, "globex")
			j.Limits.MaxOutputBytes, j.Limits.MaxOutputLines = 1<<20, 0 // the profile's 4 KiB would end the stream
			ids[k] = j.ID
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := newOutput(p, &streams, j)
				for i := range lines {
					o.Append(0, "stdout", []byte(fmt.Sprintf("job %d line %04d\n", k, i)))
				}
				o.Close()
			}()
		}
		wg.Wait()
		for k, id := range ids {
			var got strings.Builder
			after := int64(0)
			for {
				_, evs, err := s.Events(ctx, "", id, after, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) == 0 {
					break
				}
				for _, e := range evs {
					if e.Seq != after+1 {
						t.Fatalf("job %d: event %d after %d", k, e.Seq, after)
					}
					after = e.Seq
					if e.Kind != controlapi.KindStdout {
						continue
					}
					d, err := e.Output()
					if err != nil || len(d.Bytes()) > 64 {
						t.Fatalf("job %d event %d: %d bytes, %v", k, e.Seq, len(d.Bytes()), err)
					}
					got.Write(d.Bytes())
				}
			}
			var want strings.Builder
			for i := range lines {
				fmt.Fprintf(&want, "job %d line %04d\n", k, i)
			}
			if got.String() != want.String() {
				t.Fatalf("job %d: the stream holds %d bytes out of order or lost, want %d", k, got.Len(), want.Len())
			}
		}
	})
}

// TestOutputStreamCommandStatusAtOnce: a command's start reaches the
// stream when it starts, not with the command's first output or its end.
func TestOutputStreamCommandStatusAtOnce(t *testing.T) {
	repo := configRepo(t)
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := eventPlane(t, s, repo, EventConfig{})
	j := submitJob(t, p, "globex")
	var streams atomic.Int64
	o := newOutput(p, &streams, j)
	defer o.Close()
	o.Command(0, []string{"sleep", "600"})
	wake, stop := s.inner.Subscribe(j.ID)
	defer stop()
	for {
		_, evs, err := s.Events(context.Background(), "", j.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(evs); n > 0 && evs[n-1].Kind == controlapi.KindStatus {
			return
		}
		<-wake // the test's deadline fails it if the status never comes
	}
}
