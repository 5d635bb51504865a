package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
)

// Trimmable says retention may delete events of the kind (output chunks
// and status summaries); every other kind is kept for the job's life.
func Trimmable(k controlapi.EventKind) bool {
	return k == controlapi.KindStdout || k == controlapi.KindStderr || k == controlapi.KindStatus
}

// Event errors.
var (
	// ErrEventKind: a kind outside EventsVersion's set, or data that is not
	// a JSON object.
	ErrEventKind = errors.New("control: invalid event")
	// ErrStreamEnded: an append after the stream's result event.
	ErrStreamEnded = errors.New("control: the job's event stream has ended")
)

// NewEvent is an event to append: the store gives it its job, sequence and
// time.
type NewEvent struct {
	Kind controlapi.EventKind
	Data json.RawMessage
}

// EventConfig bounds the event streams: retention (time and size per job,
// trimming output events only), the size of an output event, how long
// output is coalesced before it is appended, and when an SSE client that
// does not read is dropped.
type EventConfig struct {
	// MaxAge: output events older than this are trimmed (default 7 days).
	MaxAge time.Duration
	// MaxBytesPerJob: when a job's retained output events exceed this, the
	// oldest are trimmed to three quarters of it (default 64 MiB).
	MaxBytesPerJob int64
	// ChunkBytes bounds one output event (default 16 KiB).
	ChunkBytes int
	// FlushInterval: output is appended at least this often while a
	// command writes (default 50ms); small writes in between are coalesced
	// into one transaction.
	FlushInterval time.Duration
	// InFlightBytes bounds the output of all running jobs written but not
	// yet committed, shared equally among the jobs writing (at least
	// 1 KiB and at most 256 KiB each; default 256 KiB): a writer whose job
	// has its share pending queues it as the job's next append and waits
	// for that to commit. It is the streams' backpressure: a command writing
	// faster than the store commits is slowed at its pipe, and an event's
	// write-to-read latency stays near two commits however many jobs write.
	InFlightBytes int
	// SlowClient: an SSE write blocked this long drops the client, which
	// resumes with Last-Event-ID (default 10s).
	SlowClient time.Duration
	// Retry is the SSE retry: advice to clients (default 1s).
	Retry time.Duration
}

func (c EventConfig) WithDefaults() EventConfig {
	if c.MaxAge <= 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.MaxBytesPerJob <= 0 {
		c.MaxBytesPerJob = 64 << 20
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 16 << 10
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 50 * time.Millisecond
	}
	if c.InFlightBytes <= 0 {
		c.InFlightBytes = 256 << 10
	}
	if c.SlowClient <= 0 {
		c.SlowClient = 10 * time.Second
	}
	if c.Retry <= 0 {
		c.Retry = time.Second
	}
	return c
}

// checkEvent refuses a kind outside the set and data that is not one JSON
// object, and returns the data compacted: a stored event's data is valid
// JSON on one line, so readers serve it as it is.
func checkEvent(e NewEvent) (NewEvent, error) {
	if !e.Kind.Valid() {
		return e, fmt.Errorf("%w: kind %q is not one of %s's", ErrEventKind, e.Kind, controlapi.EventsVersion)
	}
	if d := bytes.TrimLeft(e.Data, " \t\r\n"); len(d) == 0 || d[0] != '{' || !json.Valid(d) {
		return e, fmt.Errorf("%w: %s event: data must be a JSON object", ErrEventKind, e.Kind)
	}
	if bytes.ContainsAny(e.Data, "\r\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, e.Data); err != nil {
			return e, fmt.Errorf("%w: %s event: %v", ErrEventKind, e.Kind, err)
		}
		e.Data = b.Bytes()
	}
	return e, nil
}

func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types, which always marshal
	}
	return b
}

// AppendJSONString appends s as a JSON string, byte for byte as
// encoding/json writes it: ASCII escaped here (\n, \r, \t, \b, \f, the
// quote and the backslash, \u00XX for other control bytes, and the HTML
// escapes of <, > and &); a string with any other byte goes through
// encoding/json (its U+2028, U+2029 and invalid UTF-8 rules).
func AppendJSONString[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			q, _ := json.Marshal(string(s)) // a string always marshals
			return append(b, q...)
		}
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// TextOutputJSON is OutputData{Command: cmd, Text: string(text)} (text
// valid UTF-8, not empty) as json.Marshal writes it, without reflection or
// a copy of text: the shape Output reads directly.
func TextOutputJSON(cmd int, text []byte) json.RawMessage {
	b := make([]byte, 0, len(text)+32)
	b = append(b, `{"command":`...)
	b = strconv.AppendInt(b, int64(cmd), 10)
	b = append(b, `,"text":`...)
	b = AppendJSONString(b, text)
	return append(b, '}')
}

func tp(t time.Time) *time.Time { t = t.UTC(); return &t }
