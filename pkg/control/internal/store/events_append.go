package store

// An append transaction: the events of one or many appends counted on
// their jobs' heads and written as segments, in a few multi-row statements.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// appendTx appends evs to jobID's stream within tx.
func (s *Store) appendTx(ctx context.Context, tx *sql.Tx, jobID string, evs []NewEvent, at time.Time) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	g := newAppendGroup(jobID, evs)
	if err := s.appendGroupsTx(ctx, tx, []*appendGroup{g}, at); err != nil {
		return 0, err
	}
	if !g.taken {
		return 0, fmt.Errorf("%w: job %s", ErrStreamEnded, jobID)
	}
	return g.last, nil
}

// appendGroup is the events one append transaction adds to one job's
// stream.
type appendGroup struct {
	job      string
	evs      []NewEvent
	outBytes int64 // of output kinds
	ended    int   // 1: a result event ends the stream
	// set by appendGroupsTx: taken (false: the stream had ended, nothing
	// was written), the last sequence, the output bytes retained
	taken       bool
	last, total int64
}

func newAppendGroup(job string, evs []NewEvent) *appendGroup {
	g := &appendGroup{job: job, evs: evs}
	g.tally()
	return g
}

// tally counts the group's output bytes and whether it ends the stream.
func (g *appendGroup) tally() {
	g.outBytes, g.ended = 0, 0
	for _, e := range g.evs {
		if Trimmable(e.Kind) {
			g.outBytes += int64(len(e.Data))
		}
		if e.Kind == controlapi.KindResult {
			g.ended = 1
		}
	}
}

// appendGroupsTx appends each group's events (a job at most once, in no
// group empty) to its stream within tx: the heads counted in one statement
// per chunk of groups, then the segments likewise. A group whose stream
// has ended writes nothing and is left not taken.
func (s *Store) appendGroupsTx(ctx context.Context, tx *sql.Tx, gs []*appendGroup, at time.Time) error {
	for _, g := range gs {
		for _, e := range g.evs {
			if bytes.IndexByte(e.Data, '\n') >= 0 { // a segment's lines; checkEvent compacted the data
				return fmt.Errorf("%w: %s event of job %s: data spans lines", ErrEventKind, e.Kind, g.job)
			}
		}
	}
	byJob := make(map[string]*appendGroup, len(gs))
	for _, g := range gs {
		byJob[g.job] = g
		g.taken = false // set by this run only (s.tx may run it again)
	}
	rest := gs
	for _, n := range chunks(len(gs), s.rowStmts != nil) {
		part := rest[:n]
		rest = rest[n:]
		args := make([]any, 0, 4*n)
		for _, g := range part {
			args = append(args, g.job, len(g.evs), g.outBytes, g.ended)
		}
		rows, err := s.writeQuery(ctx, tx, upsertHeadsSQL(n), args)
		if err != nil {
			return err
		}
		for rows.Next() {
			var job string
			var last, total int64
			if err := rows.Scan(&job, &last, &total); err != nil {
				rows.Close()
				return err
			}
			if g := byJob[job]; g != nil {
				g.taken, g.last, g.total = true, last, total
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	type row struct {
		job string
		segment
	}
	var segs []row
	for _, g := range gs {
		if !g.taken {
			continue
		}
		for _, sg := range segments(g.evs, g.last-int64(len(g.evs))+1) {
			segs = append(segs, row{g.job, sg})
		}
	}
	for _, n := range chunks(len(segs), s.rowStmts != nil) {
		args := make([]any, 0, 7*n)
		for _, r := range segs[:n] {
			args = append(args, r.job, r.last, r.first, at.UnixNano(), r.output, r.events, r.size)
		}
		segs = segs[n:]
		if err := s.writeExec(ctx, tx, insertSegmentsSQL(n), args); err != nil {
			return err
		}
	}
	maxBytes := s.ev.retention().MaxBytesPerJob
	for _, g := range gs {
		if !g.taken {
			continue
		}
		job := g.job
		if g.total > maxBytes {
			if err := s.trimSize(ctx, tx, job, g.total, maxBytes*3/4); err != nil {
				return err
			}
		}
		if s.d.name == "postgres" {
			if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, pgNotifyChannel, job); err != nil {
				return err
			}
		}
		var tracked []controlapi.Event // only a followed job keeps a tail (nil: none kept)
		if s.ev.followed(job) {
			first := g.last - int64(len(g.evs)) + 1
			tracked = make([]controlapi.Event, len(g.evs))
			for k, e := range g.evs {
				tracked[k] = controlapi.Event{Job: job, Seq: first + int64(k), At: at.UTC(), Kind: e.Kind, Data: e.Data}
			}
		}
		s.ev.pending(tx, job, tracked)
	}
	return nil
}

// Chunk sizes of the multi-row statements: SQLite's are prepared once
// (stmtChunks), so a count is cut into those sizes; PostgreSQL takes up to
// 200 rows a statement.
var stmtChunks = []int{64, 16, 4, 1}

func chunks(n int, prepared bool) []int {
	var out []int
	for n > 0 {
		c := min(n, 200)
		if prepared {
			for _, c = range stmtChunks {
				if c <= n {
					break
				}
			}
		}
		out = append(out, c)
		n -= c
	}
	return out
}

// upsertHeadsSQL counts n appends on their jobs' heads, returning each
// head taken (a stream that has ended takes none).
func upsertHeadsSQL(n int) string {
	if q, ok := chunkSQL.heads[n]; ok {
		return q
	}
	return buildHeadsSQL(n)
}

func buildHeadsSQL(n int) string {
	return `INSERT INTO cp_event_heads (job_id, last_seq, output_bytes, ended) VALUES ` + valuesSQL(n, 4) + `
		ON CONFLICT (job_id) DO UPDATE SET last_seq = cp_event_heads.last_seq + excluded.last_seq,
			output_bytes = cp_event_heads.output_bytes + excluded.output_bytes, ended = excluded.ended
		WHERE cp_event_heads.ended = 0
		RETURNING job_id, last_seq, output_bytes`
}

func insertSegmentsSQL(n int) string {
	if q, ok := chunkSQL.segments[n]; ok {
		return q
	}
	return buildSegmentsSQL(n)
}

func buildSegmentsSQL(n int) string {
	return `INSERT INTO cp_event_segments (job_id, last_seq, first_seq, at_ns, output, events, size) VALUES ` + valuesSQL(n, 7)
}

// chunkSQL holds the statements of stmtChunks' sizes, built once: they
// are also the keys of their prepared statements.
var chunkSQL = func() (c struct{ heads, segments map[int]string }) {
	c.heads, c.segments = map[int]string{}, map[int]string{}
	for _, n := range stmtChunks {
		c.heads[n], c.segments[n] = buildHeadsSQL(n), buildSegmentsSQL(n)
	}
	return c
}()

// valuesSQL is n rows of cols placeholders.
func valuesSQL(n, cols int) string {
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// writeQuery and writeExec run a statement in tx: prepared on SQLite.
func (s *Store) writeQuery(ctx context.Context, tx *sql.Tx, q string, args []any) (*sql.Rows, error) {
	if st := s.rowStmts[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, s.d.q(q), args...)
}

func (s *Store) writeExec(ctx context.Context, tx *sql.Tx, q string, args []any) error {
	_, err := s.exec(ctx, tx, q, args...)
	return err
}
