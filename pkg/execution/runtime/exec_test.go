package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A command stopped at its timeout, in a bubblewrap sandbox through the
// API: one that exits on SIGTERM was terminated (with its own exit code),
// one that ignores it was killed once the grace had passed.
func TestExecStopOutcome(t *testing.T) {
	a := newAPIRig(t, 1)
	ctx := context.Background()
	g, err := a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, TimeoutSeconds: 0.5, GraceSeconds: 10,
		Argv: []string{"sh", "-c", "trap 'echo bye; exit 0' TERM; echo hi; sleep 100 & wait"}})
	if err != nil || !res.TimedOut || res.Stop != runner.StopTerminated || res.ExitCode != 0 || res.Stdout != "hi\nbye\n" {
		t.Errorf("a command that exits on TERM: %+v, %v", res, err)
	}

	start := time.Now()
	res, err = a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, TimeoutSeconds: 0.3, GraceSeconds: 1,
		Argv: []string{"sh", "-c", "trap '' TERM; echo stay; sleep 100"}})
	took := time.Since(start)
	if err != nil || !res.TimedOut || res.Stop != runner.StopKilled || res.ExitCode != -1 || res.Stdout != "stay\n" {
		t.Errorf("a command that ignores TERM: %+v, %v", res, err)
	}
	if took < 1300*time.Millisecond || took > 1300*time.Millisecond+3*time.Second {
		t.Errorf("a command that ignores TERM took %s, want the timeout and the grace (1.3 s) plus at most 3 s", took)
	}

	res, err = a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, TimeoutSeconds: 10, Argv: []string{"true"}})
	if err != nil || res.TimedOut || res.Stop != "" {
		t.Errorf("a command that exits by itself: %+v, %v", res, err)
	}
	for _, b := range []runtimeapi.ExecBody{{GraceSeconds: 61}, {GraceSeconds: -1}, {MaxOutput: runner.MaxOutputLimit + 1}} {
		b.Token, b.Argv = g.Token, []string{"true"}
		var apiErr *runtimeapi.APIError
		if _, err := a.c.Exec(ctx, g.RunID, b); !errors.As(err, &apiErr) || apiErr.Status != 400 {
			t.Errorf("exec %+v: %v, want 400", b, err)
		}
	}
}

// With keepTail, a command that prints 10 MB keeps its first and its last
// bytes (half the bound each), with a line saying how many were dropped
// between them, and DroppedBytes counts them.
func TestExecKeepTail(t *testing.T) {
	a := newAPIRig(t, 1)
	ctx := context.Background()
	g, err := a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 10_000_000
	script := fmt.Sprintf("echo BEGIN-MARK; yes 0123456789 | head -c %d; echo; echo END-MARK; echo only-this >&2", size)
	total := int64(len("BEGIN-MARK\n") + size + len("\nEND-MARK\n"))

	const limit = 1 << 20
	res, err := a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", script}, MaxOutput: limit, KeepTail: true})
	if err != nil {
		t.Fatal(err)
	}
	dropped := total - limit
	marker := fmt.Sprintf("\n[... %d bytes dropped ...]\n", dropped)
	if !strings.HasPrefix(res.Stdout, "BEGIN-MARK\n") || !strings.HasSuffix(res.Stdout, "\nEND-MARK\n") ||
		strings.Count(res.Stdout, marker) != 1 || len(res.Stdout) != limit+len(marker) {
		t.Errorf("stdout: %d bytes, begins %q, ends %q; want %d bytes around %q", len(res.Stdout), res.Stdout[:min(40, len(res.Stdout))],
			res.Stdout[max(0, len(res.Stdout)-40):], limit+len(marker), marker)
	}
	if res.Stderr != "only-this\n" || res.DroppedBytes != dropped || !res.Truncated || res.ExitCode != 0 {
		t.Errorf("result: stderr %q, droppedBytes %d (want %d), truncated %v, exit %d", res.Stderr, res.DroppedBytes, dropped, res.Truncated, res.ExitCode)
	}

	// without it, the first bytes are kept, as before, and the rest counted
	res, err = a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", script}, MaxOutput: limit})
	if err != nil || len(res.Stdout)+len(res.Stderr) != limit || !strings.HasPrefix(res.Stdout, "BEGIN-MARK\n") ||
		strings.Contains(res.Stdout, "END-MARK") || res.DroppedBytes != total+int64(len("only-this\n"))-limit {
		t.Errorf("without keepTail: %d+%d bytes, droppedBytes %d, %v", len(res.Stdout), len(res.Stderr), res.DroppedBytes, err)
	}
}
