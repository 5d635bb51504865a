package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// eventLog is an EventWriter: output and events in the order they came.
type eventLog struct {
	mu  sync.Mutex
	out bytes.Buffer
	seq []string
	evs []runner.Event
}

func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Write(p)
	l.seq = append(l.seq, "out:"+strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *eventLog) WriteEvent(e runner.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
	l.seq = append(l.seq, "event:"+e.Kind)
	return nil
}

// serveEvents starts a runner in-process with an events socket and
// returns a client and the socket's path.
func serveEvents(t *testing.T) (*runner.Client, string) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	evPath := filepath.Join(dir, "ev", "events.sock")
	eln, err := runner.ListenEvents(evPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(evPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("events socket mode: %v %v", fi, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Serve(ctx, ln, runner.Config{Digest: "sha256:" + strings.Repeat("ab", 32), Generation: "g-1", SandboxID: "sb-1",
			Workdir: dir, Env: []string{"PATH=/usr/bin:/bin", runner.EnvEvents + "=" + evPath}, Events: eln})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return runner.NewClient(runner.DialUnix(filepath.Join(dir, "r.sock"))), evPath
}

// raw writes b to the events socket as a hostile workload would and
// returns the answer.
func raw(t *testing.T, path string, b []byte) runner.EventAnswer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write(b) }()
	var a runner.EventAnswer
	if err := json.NewDecoder(c).Decode(&a); err != nil {
		t.Fatalf("answer: %v", err)
	}
	return a
}

// A command's events reach the client between its output, with the
// runner's clock and in order; payload_fetched comes first; the stamp
// kinds come once and in order; hostile lines are refused, counted by
// reason in the exit, and the command runs on.
func TestWorkloadEvents(t *testing.T) {
	c, evPath := serveEvents(t)
	ctx := context.Background()
	started := make(chan struct{})
	var l eventLog
	var st *runner.ExitStatus
	var execErr error
	go func() {
		defer close(started)
		// the command waits for the file the test writes once it is done
		st, execErr = c.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", `echo before; while [ ! -e go ]; do sleep 0.02; done; echo after`}}, &l, &l)
	}()
	// with no command running yet, an event is refused as no_command
	// (unless the command already started: then it is delivered)
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		n := len(l.seq)
		l.mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	send := func(kind, data string) error {
		return runner.SendEvent(ctx, evPath, kind, []byte(data))
	}
	if err := send(runner.EventModelRequest, `{"model":"m-1"}`); err != nil {
		t.Fatal(err)
	}
	if err := send(runner.EventToolCall, `{"tool":"grep","args":["-r","x"]}`); err != nil {
		t.Fatal(err)
	}
	if err := send(runner.EventFirstOutput, ``); err != nil {
		t.Fatal(err)
	}
	// hostile: forged kinds, out of order, oversized, malformed, not an object
	for _, tc := range []struct{ kind, data, reason string }{
		{"stdout", `{"text":"forged"}`, runner.RejectUnknownKind},
		{"state", `{"state":"succeeded"}`, runner.RejectUnknownKind},
		{runner.EventPayloadFetched, ``, runner.RejectUnknownKind},
		{runner.EventModelRequest, ``, runner.RejectOrder},
		{runner.EventFirstOutput, ``, runner.RejectOrder},
		{runner.EventStatus, `[1,2]`, runner.RejectMalformed},
	} {
		if err := send(tc.kind, tc.data); err == nil || !strings.Contains(err.Error(), "("+tc.reason+")") {
			t.Errorf("event %s %s: %v, want refused as %s", tc.kind, tc.data, err, tc.reason)
		}
	}
	if a := raw(t, evPath, append(bytes.Repeat([]byte("x"), 4<<20), '\n')); a.OK || a.Reason != runner.RejectOversized {
		t.Errorf("a 4 MiB line: %+v", a)
	}
	if a := raw(t, evPath, []byte("not json\n")); a.OK || a.Reason != runner.RejectMalformed {
		t.Errorf("not JSON: %+v", a)
	}
	// a flood: past the burst, refused
	var ok, flood int
	floodStart := time.Now()
	for range runner.EventBurst + 50 {
		err := send(runner.EventStatus, `{"step":1}`)
		switch {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "("+runner.RejectFlood+")"):
			flood++
		default:
			t.Fatal(err)
		}
	}
	// at most the burst (less what came before) and the refill meanwhile
	if refill := int(time.Since(floodStart).Seconds()*runner.EventRate) + 1; flood == 0 || ok > runner.EventBurst+refill {
		t.Errorf("flood: %d delivered, %d refused", ok, flood)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(filepath.Dir(evPath)), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-started
	if execErr != nil {
		t.Fatal(execErr)
	}
	if st.ExitCode != 0 || l.out.String() != "before\nafter\n" {
		t.Fatalf("the command: %+v, output %q", st, l.out.String())
	}
	want := map[string]int{runner.RejectUnknownKind: 3, runner.RejectOrder: 2, runner.RejectMalformed: 2, runner.RejectOversized: 1, runner.RejectFlood: flood}
	if len(st.EventsRejected) != len(want) {
		t.Errorf("rejected %v, want %v", st.EventsRejected, want)
	}
	for k, v := range want {
		if st.EventsRejected[k] != v {
			t.Errorf("rejected %v, want %v", st.EventsRejected, want)
		}
	}
	seq := strings.Join(l.seq, " ")
	if !strings.HasPrefix(seq, "event:payload_fetched out:before event:model_request event:tool_call event:first_output event:status") ||
		!strings.HasSuffix(seq, "event:status out:after") {
		t.Errorf("order: %s", seq)
	}
	if e := l.evs[2]; e.Kind != runner.EventToolCall || string(e.Data) != `{"tool":"grep","args":["-r","x"]}` || e.At.IsZero() {
		t.Errorf("tool call: %+v", e)
	}
	if l.evs[0].At.After(l.evs[1].At) || l.evs[1].At.After(l.evs[3].At) {
		t.Errorf("times out of order: %+v", l.evs[:4])
	}
	// the ping counts the refusals since the runner started
	if p, err := c.Ping(ctx); err != nil || p.EventsRejected[runner.RejectUnknownKind] != 3 {
		t.Errorf("ping: %+v %v", p, err)
	}
	// no command running: refused, counted
	if err := send(runner.EventStatus, `{}`); err == nil || !strings.Contains(err.Error(), runner.RejectNoCommand) {
		t.Errorf("with no command: %v", err)
	}
	// a client that does not ask for events gets none, and its command runs
	var plain bytes.Buffer
	if st, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"echo", "x"}}, &plain, &plain); err != nil || st.ExitCode != 0 || plain.String() != "x\n" {
		t.Errorf("plain exec: %+v %v %q", st, err, plain.String())
	}
}

// TestMain lets the test binary be a workload that writes and reports:
// run with RUNNER_TEST_EVENT=KIND, it writes 60000 bytes to stdout and at
// once sends one event to $SLIPWAY_EVENTS, 20 times.
func TestMain(m *testing.M) {
	if kind := os.Getenv("RUNNER_TEST_EVENT"); kind != "" {
		chunk := bytes.Repeat([]byte("x"), roundBytes)
		for range rounds {
			if _, err := os.Stdout.Write(chunk); err != nil {
				os.Exit(2)
			}
			if err := runner.SendEvent(context.Background(), os.Getenv(runner.EnvEvents), kind, []byte(`{"n":1}`)); err != nil {
				os.Stderr.WriteString(err.Error() + "\n")
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const rounds, roundBytes = 20, 60000

// An event the command reports comes after every byte it wrote before:
// the runner frames what is still in the pipes first. The workload writes
// 60000 bytes (most of a pipe's buffer) and reports a status at once, 20
// times: without the runner's drain, most events overtake output.
func TestEventsFollowTheOutputBeforeThem(t *testing.T) {
	c, _ := serveEvents(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var l countLog
	st, err := c.Exec(context.Background(), runner.ExecRequest{Argv: []string{self},
		Env: map[string]string{"RUNNER_TEST_EVENT": runner.EventStatus}, MaxOutput: rounds * roundBytes}, &l, &l)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	if len(l.at) != rounds+1 { // payload_fetched and the rounds
		t.Fatalf("%d events, want %d", len(l.at), rounds+1)
	}
	for k, n := range l.at[1:] {
		if n != int64(k+1)*roundBytes {
			t.Errorf("event %d came after %d bytes of output, want %d", k+1, n, (k+1)*roundBytes)
		}
	}
}

// countLog notes how much output came before each event.
type countLog struct {
	mu sync.Mutex
	n  int64
	at []int64
}

func (l *countLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.n += int64(len(p))
	l.mu.Unlock()
	return len(p), nil
}

func (l *countLog) WriteEvent(runner.Event) error {
	l.mu.Lock()
	l.at = append(l.at, l.n)
	l.mu.Unlock()
	return nil
}
