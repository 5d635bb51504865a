package store

// A job's events are stored as segments: the rows of cp_event_segments,
// each the consecutive events of one append, one per line.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// migrateEventRows moves the events of a store written before segments
// (cp_events, one row per event) into segments of one event each, with
// data that spans lines compacted, and drops the old table.
func (s *Store) migrateEventRows(ctx context.Context, tx *sql.Tx) error {
	exists, compact := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'cp_events'`,
		`CASE WHEN instr(data, char(10)) > 0 THEN json(data) ELSE data END`
	if s.d.name == "postgres" {
		if _, err := tx.ExecContext(ctx, s.d.lockStmt); err != nil { // one replica migrates
			return err
		}
		exists, compact = `SELECT COUNT(*) FROM (SELECT to_regclass('cp_events') AS t) r WHERE r.t IS NOT NULL`,
			`CASE WHEN strpos(data, chr(10)) > 0 THEN (data::jsonb)::text ELSE data END`
	}
	var n int
	if err := tx.QueryRowContext(ctx, exists).Scan(&n); err != nil || n == 0 {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cp_event_segments (job_id, last_seq, first_seq, at_ns, output, events, size)
		SELECT job_id, seq, seq, at_ns, CASE WHEN kind IN `+trimmableKinds+` THEN 1 ELSE 0 END, kind || ' ' || `+compact+`, size FROM cp_events`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DROP TABLE cp_events`)
	return err
}

// trimmableKinds is the SQL list of the kinds retention deletes (of the
// table of one row per event that segments replaced).
const trimmableKinds = `('stdout', 'stderr', 'status')`

// maxSegmentEvents bounds the events of one segment: what a read from the
// middle of a segment decodes and skips.
const maxSegmentEvents = 128

// segment is one row of cp_event_segments to write.
type segment struct {
	first, last int64
	output      int // 1: output events
	events      string
	size        int64
}

// segments cuts evs (sequences from first) into segments: runs of output
// or of other kinds, at most maxSegmentEvents each.
func segments(evs []NewEvent, first int64) []segment {
	var out []segment
	var b strings.Builder
	for i := 0; i < len(evs); {
		out1 := Trimmable(evs[i].Kind)
		sg := segment{first: first + int64(i)}
		if out1 {
			sg.output = 1
		}
		j, n := i, 0
		for ; j < len(evs) && j-i < maxSegmentEvents && Trimmable(evs[j].Kind) == out1; j++ {
			n += len(evs[j].Kind) + len(evs[j].Data) + 2
		}
		b.Reset()
		b.Grow(n) // one allocation: the segment's text
		for k := i; k < j; k++ {
			if k > i {
				b.WriteByte('\n')
			}
			writeSegmentLine(&b, evs[k])
			sg.size += int64(len(evs[k].Data))
		}
		sg.last, sg.events = first+int64(j-1), b.String()
		out = append(out, sg)
		i = j
	}
	return out
}

// segmentLine is an event's line in a segment: its kind, a space, its
// data (compact JSON).
func segmentLine(e NewEvent) string {
	var b strings.Builder
	b.Grow(len(e.Kind) + 1 + len(e.Data))
	writeSegmentLine(&b, e)
	return b.String()
}

// writeSegmentLine writes e's line in a segment to b.
func writeSegmentLine(b *strings.Builder, e NewEvent) {
	b.WriteString(string(e.Kind))
	b.WriteByte(' ')
	b.Write(e.Data)
}

// parseSegment reads a segment's events (those after after, at most
// limit).
func parseSegment(jobID string, first, last, atNS int64, events string, after int64, limit int, out []controlapi.Event) ([]controlapi.Event, error) {
	at := time.Unix(0, atNS).UTC()
	seq := first
	for rest := events; limit > 0; seq++ {
		line, tail, more := strings.Cut(rest, "\n")
		kind, data, ok := strings.Cut(line, " ")
		if !ok || seq > last {
			return out, fmt.Errorf("control: job %s: event segment %d..%d is damaged at %d", jobID, first, last, seq)
		}
		if seq > after {
			out = append(out, controlapi.Event{Job: jobID, Seq: seq, At: at, Kind: controlapi.EventKind(kind), Data: []byte(data)})
			limit--
		}
		if !more {
			if seq != last {
				return out, fmt.Errorf("control: job %s: event segment %d..%d holds %d events", jobID, first, last, seq-first+1)
			}
			break
		}
		rest = tail
	}
	return out, nil
}
