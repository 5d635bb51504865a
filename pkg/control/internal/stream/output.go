package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

// Output appends a running job's output to its event stream as it
// is produced: chunks of at most ChunkBytes, coalesced for FlushInterval so
// many small writes make one transaction, up to the job's output limit
// (bytes and lines); past it one status event says so and the rest is
// counted, not appended (the job's bounded output keeps its tail). Memory
// stays within a few chunks whatever the command writes.
type Output struct {
	s     *store.Store
	job   string
	chunk int
	// budget is EventConfig.InFlightBytes, shared among the plane's open
	// streams (streams): a write that leaves a share pending flushes
	// synchronously.
	budget  int
	streams *atomic.Int64

	mu                 sync.Mutex
	pending            []store.NewEvent
	pendingBytes       int
	cur                []byte
	spare              []byte // cur's array once sealed (seal copies what it keeps)
	curKind            controlapi.EventKind
	curCmd             int
	carry              map[controlapi.EventKind][]byte // an incomplete UTF-8 sequence
	maxBytes, maxLines int64
	bytes, lines       int64
	over               bool
	dropped            int64
	lost               int64 // bytes an append failed to store

	kick chan struct{} // output is pending: flush now unless a flush runs
	stop chan struct{}
	done chan struct{}
	log  func(msg string, args ...any)
}

// NewOutput starts job j's output stream on s, bounded by j's output
// limits and c (ChunkBytes, InFlightBytes, FlushInterval); streams counts
// the open streams sharing c.InFlightBytes, log is told of failed appends.
func NewOutput(s *store.Store, j *controlapi.Job, c store.EventConfig, streams *atomic.Int64, log func(msg string, args ...any)) *Output {
	o := &Output{s: s, job: j.ID, chunk: c.ChunkBytes, budget: c.InFlightBytes, streams: streams, carry: map[controlapi.EventKind][]byte{},
		maxBytes: j.Limits.MaxOutputBytes, maxLines: j.Limits.MaxOutputLines,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), log: log}
	if o.maxBytes <= 0 {
		o.maxBytes = 1 << 62
	}
	streams.Add(1)
	go func() {
		defer close(o.done)
		t := time.NewTicker(c.FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-o.stop:
				return
			case <-t.C:
				o.flush()
			case <-o.kick:
				// Output arrived: append it now. What arrives while this
				// append commits waits for the next one, so a fast writer's
				// output is batched and a slow writer's is not delayed.
				o.flush()
			}
		}
	}()
	return o
}

// Command notes the start of command i.
func (o *Output) Command(i int, argv []string) {
	o.mu.Lock()
	o.seal()
	o.pending = append(o.pending, store.NewEvent{Kind: controlapi.KindStatus, Data: store.MustJSON(map[string]any{"command": i, "argv": argv})})
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// WorkloadData is the data of an event command i's workload reported
// (slipway-runner event): tool_call, file and diff keep their kind, the
// rest (model_request, first_output, status) are status events; Event
// names the workload's kind, At is the runner's clock, Data the
// workload's object.
type WorkloadData struct {
	Command int             `json:"command"`
	Source  string          `json:"source"` // "workload"
	Event   string          `json:"event"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Event takes an event command i's workload reported, in order with its
// output: the chunk written so far is sealed first.
func (o *Output) Event(i int, kind string, at time.Time, data json.RawMessage) {
	k := controlapi.KindStatus
	switch kind {
	case "tool_call":
		k = controlapi.KindToolCall
	case "file":
		k = controlapi.KindFile
	case "diff":
		k = controlapi.KindDiff
	}
	o.mu.Lock()
	o.seal()
	o.pending = append(o.pending, store.NewEvent{Kind: k, Data: store.MustJSON(WorkloadData{Command: i, Source: "workload", Event: kind, At: at.UTC(), Data: data})})
	o.pendingBytes += len(data)
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Rejected notes the events command i's workload tried to report and the
// runner refused, by reason: one status event says so.
func (o *Output) Rejected(i int, rejected map[string]int) {
	if len(rejected) == 0 {
		return
	}
	n := 0
	for _, v := range rejected {
		n += v
	}
	o.mu.Lock()
	o.seal()
	o.pending = append(o.pending, store.NewEvent{Kind: controlapi.KindStatus, Data: store.MustJSON(map[string]any{"command": i, "eventsRejected": rejected,
		"detail": fmt.Sprintf("the runner refused %d events the workload tried to report (by reason: %v)", n, rejected)})})
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Append takes a chunk of command i's stream (stdout or stderr).
func (o *Output) Append(i int, stream string, p []byte) {
	kind := controlapi.KindStdout
	if stream == "stderr" {
		kind = controlapi.KindStderr
	}
	o.mu.Lock()
	if o.over {
		o.dropped += int64(len(p))
		o.mu.Unlock()
		return
	}
	for len(p) > 0 {
		if o.bytes >= o.maxBytes || (o.maxLines > 0 && o.lines >= o.maxLines) {
			o.seal()
			o.over = true
			o.dropped += int64(len(p))
			o.pending = append(o.pending, store.NewEvent{Kind: controlapi.KindStatus, Data: store.MustJSON(map[string]any{"command": i, "outputLimit": map[string]int64{"bytes": o.maxBytes, "lines": o.maxLines},
				"detail": fmt.Sprintf("the job's output reached its limit (%d bytes, %d lines): the rest is not streamed; the result keeps its tail and counts what was dropped", o.maxBytes, o.maxLines)})})
			break
		}
		if o.cur != nil && (o.curKind != kind || o.curCmd != i) {
			o.seal()
		}
		if o.cur == nil {
			if o.spare == nil {
				o.spare = make([]byte, 0, 256)
			}
			o.cur, o.curKind, o.curCmd = append(o.spare[:0], o.carry[kind]...), kind, i
			delete(o.carry, kind)
		}
		n := int(min(int64(len(p)), int64(o.chunk-len(o.cur)), o.maxBytes-o.bytes))
		for k, c := range p[:n] {
			if c == '\n' {
				o.lines++
				if o.maxLines > 0 && o.lines >= o.maxLines {
					n = k + 1
					break
				}
			}
		}
		o.cur = append(o.cur, p[:n]...)
		o.bytes += int64(n)
		p = p[n:]
		if len(o.cur) >= o.chunk {
			o.seal()
		}
	}
	big := o.pendingBytes >= o.window()
	o.mu.Unlock()
	if big {
		o.flush()
		return
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// window is this stream's share of the in-flight budget.
func (o *Output) window() int {
	return min(max(o.budget/int(max(o.streams.Load(), 1)), 1<<10), 256<<10)
}

// seal turns the current chunk into a pending event (o.mu held), keeping
// an incomplete trailing UTF-8 sequence for the stream's next chunk.
func (o *Output) seal() {
	if len(o.cur) == 0 {
		o.cur = nil
		return
	}
	b := o.cur
	if !utf8.Valid(b) {
		for k := 1; k <= 3 && k < len(b); k++ {
			if utf8.Valid(b[:len(b)-k]) && !utf8.FullRune(b[len(b)-k:]) {
				o.carry[o.curKind] = append([]byte(nil), b[len(b)-k:]...)
				b = b[:len(b)-k]
				break
			}
		}
	}
	var data json.RawMessage
	if utf8.Valid(b) && len(b) > 0 {
		data = store.TextOutputJSON(o.curCmd, b)
	} else {
		data = store.MustJSON(controlapi.OutputData{Command: o.curCmd, Base64: b})
	}
	o.pending = append(o.pending, store.NewEvent{Kind: o.curKind, Data: data})
	o.pendingBytes += len(b)
	o.spare, o.cur = o.cur[:0], nil
}

// flush appends what is pending in one transaction and waits for its
// commit. It is queued before o.mu is let go, so the stream's appends
// commit in order, and one may be queued while another commits.
func (o *Output) flush() {
	o.mu.Lock()
	o.seal()
	evs := o.pending
	o.pending, o.pendingBytes = nil, 0
	if len(evs) == 0 {
		o.mu.Unlock()
		return
	}
	var outBytes int64
	for _, e := range evs {
		outBytes += int64(len(e.Data))
	}
	lost := o.lost
	if lost > 0 {
		evs = append([]store.NewEvent{{Kind: controlapi.KindStatus, Data: store.MustJSON(map[string]any{"lostBytes": lost,
			"detail": fmt.Sprintf("%d bytes of output could not be appended (the database was unavailable); the job's bounded output has them", lost)})}}, evs...)
		o.lost = 0
	}
	p := o.s.EnqueueAppend(o.job, evs)
	o.mu.Unlock()
	if _, err := o.s.AwaitAppend(context.Background(), p); err != nil {
		o.mu.Lock()
		o.lost += lost + outBytes
		o.mu.Unlock()
		o.log("append output events", "job", o.job, "err", err)
	}
}

// Close flushes the rest (carried bytes included) and stops the ticker.
// It returns the bytes not streamed past the output limit.
func (o *Output) Close() int64 {
	defer o.streams.Add(-1)
	close(o.stop)
	<-o.done
	o.mu.Lock()
	o.seal()
	for k, b := range o.carry {
		o.pending = append(o.pending, store.NewEvent{Kind: k, Data: store.MustJSON(controlapi.OutputData{Command: o.curCmd, Base64: b})})
		delete(o.carry, k)
	}
	o.mu.Unlock()
	o.flush()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dropped
}
