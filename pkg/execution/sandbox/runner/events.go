package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// EnvEvents names the variable, in every command's environment, that holds
// the path of the runner's events socket: a workload reports its own events
// there (`slipway-runner event KIND`), never to the control plane.
const EnvEvents = "SLIPWAY_EVENTS"

// The kinds a workload may report. Output and state are the runner's and
// the control plane's: a workload cannot forge them.
const (
	// EventModelRequest: the workload started its first model request
	// (stamps the run's model_request_started).
	EventModelRequest = "model_request"
	// EventFirstOutput: the workload's first useful output (stamps the
	// run's first_output).
	EventFirstOutput = "first_output"
	// EventToolCall: a tool-call request of the workload.
	EventToolCall = "tool_call"
	// EventFile, EventDiff: a file or a diff the run produced.
	EventFile = "file"
	EventDiff = "diff"
	// EventStatus: a status summary.
	EventStatus = "status"
)

// EventPayloadFetched is the runner's own event, never a workload's: the
// first command of the sandbox (its argv, environment and stdin) reached
// the runner. At is when the request was read.
const EventPayloadFetched = "payload_fetched"

var workloadKinds = map[string]bool{EventModelRequest: true, EventFirstOutput: true, EventToolCall: true,
	EventFile: true, EventDiff: true, EventStatus: true}

// WorkloadKind says kind is one a workload may report.
func WorkloadKind(kind string) bool { return workloadKinds[kind] }

// Bounds of the events socket. A hostile workload can neither hold the
// runner's memory (one line, a few connections) nor flood the job's
// stream (a rate and a count per command): what is refused is counted.
const (
	// MaxEventBytes bounds one event line: kind and data, as JSON.
	MaxEventBytes = 16 << 10
	// MaxEventsPerExec bounds the events one command's stream carries.
	MaxEventsPerExec = 1000
	// EventRate and EventBurst bound the events a sandbox reports: a
	// token bucket of EventBurst events refilled at EventRate a second.
	EventRate  = 50
	EventBurst = 100
	// MaxEventConns bounds the event connections served at once; more are
	// refused (counted as a flood).
	MaxEventConns = 4
	// eventTimeout bounds how long one event connection may take.
	eventTimeout = 5 * time.Second
)

// Reasons an event is refused (ExitStatus.EventsRejected's keys).
const (
	RejectOversized   = "oversized"    // the line is over MaxEventBytes
	RejectMalformed   = "malformed"    // not JSON, or data not a JSON object
	RejectUnknownKind = "unknown_kind" // not a workload kind (output, state: forged)
	RejectFlood       = "flood"        // over the rate, the per-command count or the connections
	RejectOrder       = "order"        // a stamp set twice, or model_request after first_output
	RejectNoCommand   = "no_command"   // no command is running to carry it
)

// EventRequest is the line a workload writes to the events socket.
type EventRequest struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data,omitempty"`
}

// EventAnswer is the runner's answer line: OK, or the reason it refused.
type EventAnswer struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Event is a workload's event as it travels: its kind, when the runner
// received it (the runner's clock: a workload cannot set it) and its data,
// a JSON object.
type Event struct {
	Kind string          `json:"kind"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data,omitempty"`
}

// EventWriter is a stdout writer of Client.Exec that also takes the
// command's events: given one, Exec asks the runner for them
// (ExecRequest.Events) and calls WriteEvent for each, in order with the
// output written to it.
type EventWriter interface {
	WriteEvent(Event) error
}

// ListenEvents makes the events socket at path (its directory created
// 0700), mode 0600: the runner runs as the workload's user, so the
// workload can reach it and nobody else.
func ListenEvents(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("runner: events socket %s: %w", path, err)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("runner: events socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner: events socket %s: %w", path, err)
	}
	return ln, nil
}

// SendEvent writes one event to the events socket at path and returns
// the runner's refusal as an error naming its reason.
func SendEvent(ctx context.Context, path string, kind string, data []byte) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("runner: events socket %s: %w", path, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(eventTimeout))
	line, err := json.Marshal(EventRequest{Kind: kind, Data: data})
	if err != nil {
		return fmt.Errorf("runner: event %s: data: %w", kind, err)
	}
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("runner: event %s: %w", kind, err)
	}
	b, err := readLine(bufio.NewReader(conn), 4<<10)
	if err != nil {
		return fmt.Errorf("runner: event %s: no answer: %w", kind, err)
	}
	var a EventAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("runner: event %s: malformed answer: %w", kind, err)
	}
	if !a.OK {
		return fmt.Errorf("runner: event %s refused (%s): %s", kind, a.Reason, a.Error)
	}
	return nil
}

// eventHub routes the workload's events to the commands that asked for
// them and keeps the sandbox's bounds.
type eventHub struct {
	mu       sync.Mutex
	subs     map[*execEvents]struct{}
	stamped  map[string]bool // model_request, first_output: once per sandbox
	tokens   float64
	last     time.Time
	rejected map[string]int // every refusal since the runner started
	now      func() time.Time
}

// execEvents is one command's share: its frames and its counts.
type execEvents struct {
	fw       *frameWriter
	flush    func() // writes the command's pending output first
	sent     int
	rejected map[string]int
}

func newEventHub() *eventHub {
	return &eventHub{subs: map[*execEvents]struct{}{}, stamped: map[string]bool{}, tokens: EventBurst,
		rejected: map[string]int{}, now: time.Now}
}

func (h *eventHub) add(x *execEvents) {
	h.mu.Lock()
	h.subs[x] = struct{}{}
	h.mu.Unlock()
}

// remove ends x's share and returns its refusals.
func (h *eventHub) remove(x *execEvents) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, x)
	if len(x.rejected) == 0 {
		return nil
	}
	return maps.Clone(x.rejected)
}

// Rejected returns the refusals since the runner started.
func (h *eventHub) Rejected() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rejected) == 0 {
		return nil
	}
	return maps.Clone(h.rejected)
}

// reject counts a refusal (h.mu held) on the hub and every running
// command that asked for events.
func (h *eventHub) reject(reason string) {
	h.rejected[reason]++
	for x := range h.subs {
		if x.rejected == nil {
			x.rejected = map[string]int{}
		}
		x.rejected[reason]++
	}
}

// deliver checks one request and sends it to the running commands; the
// answer says whether it went.
func (h *eventHub) deliver(req EventRequest) EventAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
	refuse := func(reason, format string, args ...any) EventAnswer {
		h.reject(reason)
		return EventAnswer{Reason: reason, Error: fmt.Sprintf(format, args...)}
	}
	if !workloadKinds[req.Kind] {
		return refuse(RejectUnknownKind, "kind %.40q is not one a workload reports (model_request, first_output, tool_call, file, diff, status)", req.Kind)
	}
	var data json.RawMessage
	if d := bytes.TrimSpace(req.Data); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		if d[0] != '{' || !json.Valid(d) {
			return refuse(RejectMalformed, "event %s: data must be a JSON object", req.Kind)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, d); err != nil {
			return refuse(RejectMalformed, "event %s: data: %v", req.Kind, err)
		}
		data = buf.Bytes()
	}
	if len(h.subs) == 0 {
		return refuse(RejectNoCommand, "event %s: no command that takes events is running", req.Kind)
	}
	now := h.now()
	if !h.last.IsZero() {
		h.tokens = min(EventBurst, h.tokens+now.Sub(h.last).Seconds()*EventRate)
	}
	h.last = now
	if h.tokens < 1 {
		return refuse(RejectFlood, "event %s: over %d events a second (burst %d)", req.Kind, EventRate, EventBurst)
	}
	for x := range h.subs {
		if x.sent >= MaxEventsPerExec {
			return refuse(RejectFlood, "event %s: the command reported %d events, the most one may", req.Kind, MaxEventsPerExec)
		}
	}
	switch req.Kind {
	case EventModelRequest, EventFirstOutput:
		if h.stamped[req.Kind] {
			return refuse(RejectOrder, "event %s: already reported: it stamps the run once", req.Kind)
		}
		if req.Kind == EventModelRequest && h.stamped[EventFirstOutput] {
			return refuse(RejectOrder, "event %s: after first_output: the stamps would be out of order", req.Kind)
		}
		h.stamped[req.Kind] = true
	}
	h.tokens--
	ev := &Event{Kind: req.Kind, At: now.UTC(), Data: data}
	for x := range h.subs {
		x.sent++
		if x.flush != nil {
			x.flush()
		}
		x.fw.write(&Frame{Type: FrameEvent, Event: ev})
	}
	return EventAnswer{OK: true}
}

// serveEvents answers the events socket until ctx ends: one event per
// connection, at most MaxEventConns at once.
func (s *server) serveEvents(ctx context.Context, ln net.Listener) {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	slots := make(chan struct{}, MaxEventConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			fmt.Fprintf(s.cfg.Log, "runner: events: accept: %v\n", err)
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			s.events.mu.Lock()
			s.events.reject(RejectFlood)
			s.events.mu.Unlock()
			writeAnswer(conn, EventAnswer{Reason: RejectFlood, Error: fmt.Sprintf("more than %d event connections at once", MaxEventConns)})
			conn.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(eventTimeout))
			writeAnswer(conn, s.eventConn(conn))
		}()
	}
}

func (s *server) eventConn(conn io.Reader) EventAnswer {
	line, err := bufio.NewReaderSize(io.LimitReader(conn, MaxEventBytes+1), 4<<10).ReadBytes('\n')
	h := s.events
	switch {
	case len(line) > MaxEventBytes:
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reject(RejectOversized)
		return EventAnswer{Reason: RejectOversized, Error: fmt.Sprintf("an event line is at most %d bytes", MaxEventBytes)}
	case err != nil:
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reject(RejectMalformed)
		return EventAnswer{Reason: RejectMalformed, Error: "no complete event line"}
	}
	var req EventRequest
	if err := json.Unmarshal(line, &req); err != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reject(RejectMalformed)
		return EventAnswer{Reason: RejectMalformed, Error: "the event line is not JSON"}
	}
	return h.deliver(req)
}

func writeAnswer(w io.Writer, a EventAnswer) {
	b, _ := json.Marshal(a)
	_, _ = w.Write(append(b, '\n'))
}
