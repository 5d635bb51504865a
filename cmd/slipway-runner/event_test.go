package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// slipway-runner event: bad use is refused before anything is sent, with
// what is at fault; a well-formed event reaches the runner, whose refusal
// (here: no command is running) comes back with its reason.
func TestEventCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.sock")
	eln, err := runner.ListenEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Serve(ctx, ln, runner.Config{Workdir: dir, Events: eln}) }()
	defer func() { cancel(); <-done }()

	for _, tc := range []struct {
		args []string
		path string
		want string
	}{
		{[]string{"status"}, "", "$SLIPWAY_EVENTS is not set"},
		{[]string{}, path, "usage"},
		{[]string{"--data", "{}"}, path, "usage"},
		{[]string{"status", "--data", "{}", "--file", "x"}, path, "usage"},
		{[]string{"status", "--data", "not json"}, path, "data is not JSON"},
		{[]string{"status", "--data", `{"a":"` + strings.Repeat("x", runner.MaxEventBytes) + `"}`}, path, "over 16384 bytes"},
		{[]string{"status", "--file", filepath.Join(dir, "missing.json")}, path, "missing.json"},
		{[]string{"status", "--data", `{"summary":"ok"}`}, path, "(no_command)"},
		{[]string{"output", "--data", `{}`}, path, "(unknown_kind)"},
	} {
		err := event(tc.args, tc.path, strings.NewReader(""))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("event %q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
