package runner_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// An exec's traceparent reaches the command as TRACEPARENT (over one in
// Env), and the exit carries the runner's timing around it; a malformed
// traceparent is refused before anything runs.
func TestExecTraceParent(t *testing.T) {
	c, _ := serve(t)
	ctx := context.Background()
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var out bytes.Buffer
	before := time.Now()
	st, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", `echo "$TRACEPARENT"; sleep 0.05`}, TraceParent: tp,
		Env: map[string]string{"TRACEPARENT": "00-00000000000000000000000000000001-0000000000000001-00"}}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != tp+"\n" {
		t.Errorf("TRACEPARENT in the command: %q, want %q", out.String(), tp)
	}
	tm := st.Timing
	if tm == nil || tm.Received.Before(before.Add(-time.Second)) || tm.Started.Before(tm.Received) || tm.Exited.Sub(tm.Started) < 50*time.Millisecond {
		t.Errorf("timing = %+v", tm)
	}

	out.Reset()
	if _, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", `echo "[$TRACEPARENT]"`}}, &out, &out); err != nil || out.String() != "[]\n" {
		t.Errorf("no traceparent: %q, %v", out.String(), err)
	}

	for _, bad := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nX=1"} {
		_, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}, TraceParent: bad}, &out, &out)
		if !errors.Is(err, runner.ErrRemote) {
			t.Errorf("traceparent %q: %v, want a refusal", bad, err)
		}
	}
}

func TestValidTraceParent(t *testing.T) {
	for s, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g": false,
		"": false,
	} {
		if got := runner.ValidTraceParent(s); got != want {
			t.Errorf("ValidTraceParent(%q) = %v, want %v", s, got, want)
		}
	}
}
