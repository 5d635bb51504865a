package controlapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// EventsVersion names the closed set of event kinds below. A kind is
// added only with a new version; a consumer that knows v1 knows every
// event a v1 stream carries.
const EventsVersion = "v1"

// EventKind is the kind of one event of a job's stream.
type EventKind string

// The v1 kinds.
const (
	// KindState: a committed state transition (appended in the
	// transition's own transaction). Data: StateData.
	KindState EventKind = "state"
	// KindStdout, KindStderr: a chunk of a command's output, in the order
	// it was produced. Data: OutputData. Trimmed by retention.
	KindStdout EventKind = "stdout"
	KindStderr EventKind = "stderr"
	// KindStatus: a status summary (progress, an output limit reached).
	// Data: a JSON object. Trimmed by retention.
	KindStatus EventKind = "status"
	// KindToolCall: a tool-call request of the workload. Data: a JSON
	// object.
	KindToolCall EventKind = "tool_call"
	// KindFile, KindDiff: a file or a diff the run produced. Data: a JSON
	// object.
	KindFile EventKind = "file"
	KindDiff EventKind = "diff"
	// KindResult: the final result, the last event of a stream, appended
	// in the transaction that makes the job terminal. Data: ResultData.
	// Never trimmed.
	KindResult EventKind = "result"
	// KindProduct: an event for a product (a message to a destination).
	// Data: a JSON object.
	KindProduct EventKind = "product"
)

var eventKinds = map[EventKind]bool{KindState: true, KindStdout: true, KindStderr: true, KindStatus: true,
	KindToolCall: true, KindFile: true, KindDiff: true, KindResult: true, KindProduct: true}

// EventKinds returns the kinds of EventsVersion, sorted.
func EventKinds() []EventKind {
	out := make([]EventKind, 0, len(eventKinds))
	for k := range eventKinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Valid says k is a kind of EventsVersion.
func (k EventKind) Valid() bool { return eventKinds[k] }

// Event is one event of a job's stream: Seq counts from 1 with no gaps and
// never repeats.
type Event struct {
	Job  string          `json:"job"`
	Seq  int64           `json:"seq"`
	At   time.Time       `json:"at"`
	Kind EventKind       `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// StateData is a state event's data.
type StateData struct {
	State  State  `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// OutputData is a stdout or stderr event's data: Text when the chunk is
// UTF-8, Base64 otherwise. Command is the command's index (from 0).
type OutputData struct {
	Command int    `json:"command"`
	Text    string `json:"text,omitempty"`
	Base64  []byte `json:"base64,omitempty"`
}

// Bytes is the chunk.
func (d OutputData) Bytes() []byte {
	if d.Base64 != nil {
		return d.Base64
	}
	return []byte(d.Text)
}

// ResultData is the result event's data: the job's final outcome and its
// bounded output. It outlives retention, like the job record.
type ResultData struct {
	State              State           `json:"state"`
	Reason             string          `json:"reason,omitempty"`
	Detail             string          `json:"detail,omitempty"`
	ExitCode           *int            `json:"exitCode,omitempty"`
	StopOutcome        string          `json:"stopOutcome,omitempty"`
	RunID              string          `json:"runId,omitempty"`
	Results            []CommandResult `json:"results,omitempty"`
	Output             string          `json:"output,omitempty"`
	OutputDroppedBytes int64           `json:"outputDroppedBytes,omitempty"`
	OutputDroppedLines int64           `json:"outputDroppedLines,omitempty"`
	EndedAt            *time.Time      `json:"endedAt,omitempty"`
}

// TrimmedData is the data of the error an SSE client (or a consumer) gets
// when events it asked for were deleted by retention.
type TrimmedData struct {
	Error string `json:"error"`
	Job   string `json:"job"`
	// After is where the reader resumed; output events (stdout, stderr,
	// status) with sequences in (After, TrimmedThrough] are gone. Other
	// kinds in that range are still delivered.
	After          int64  `json:"after"`
	TrimmedThrough int64  `json:"trimmedThrough"`
	Detail         string `json:"detail"`
}

// Output reads a stdout or stderr event's data. The shape the control
// plane writes, {"command":N,"text":"..."}, is read directly (encoding/json
// would scan it twice); any other is read by encoding/json.
func (e Event) Output() (OutputData, error) {
	if d, ok := readOutputShape(e.Data); ok {
		return d, nil
	}
	var d OutputData
	err := json.Unmarshal(e.Data, &d)
	return d, err
}

func readOutputShape(b []byte) (OutputData, bool) {
	var d OutputData
	rest, ok := bytes.CutPrefix(b, []byte(`{"command":`))
	if !ok {
		return d, false
	}
	i := bytes.IndexByte(rest, ',')
	if i <= 0 {
		return d, false
	}
	n, err := strconv.Atoi(string(rest[:i]))
	if err != nil {
		return d, false
	}
	body, ok := bytes.CutPrefix(rest[i:], []byte(`,"text":"`))
	if !ok || !bytes.HasSuffix(body, []byte(`"}`)) {
		return d, false
	}
	text, ok := unquoteJSON(body[:len(body)-2])
	if !ok {
		return d, false
	}
	d.Command, d.Text = n, text
	return d, true
}

// unquoteJSON decodes the body of a JSON string (without its quotes);
// false: it is not one (an unescaped quote or control byte, a bad escape,
// invalid UTF-8).
func unquoteJSON(b []byte) (string, bool) {
	if bytes.IndexByte(b, '\\') < 0 {
		for _, c := range b {
			if c < 0x20 || c == '"' {
				return "", false
			}
		}
		return string(b), utf8.Valid(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20 || c == '"':
			return "", false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if i+1 >= len(b) {
			return "", false
		}
		i++
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b[i+1:])
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					r2, ok = hex4(b[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r, i = d, i+6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), utf8.Valid(out)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
