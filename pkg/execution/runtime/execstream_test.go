package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// A streamed exec hands over each chunk as the command writes it (long
// before its exit), in order, then the exit; the buffered form still
// answers at exit; output past MaxOutput is counted, not streamed, even
// 100 MB without a newline.
func TestExecStream(t *testing.T) {
	a := newAPIRig(t, 1)
	ctx := context.Background()
	g, err := a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{})
	if err != nil {
		t.Fatal(err)
	}
	type chunk struct {
		stream, text string
		at           time.Time
	}
	var got []chunk
	start := time.Now()
	res, err := a.c.ExecStream(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", "echo one; sleep 1; echo two >&2; sleep 1; echo three; exit 3"}},
		func(stream string, p []byte) { got = append(got, chunk{stream, string(p), time.Now()}) })
	exited := time.Now()
	if err != nil || res.ExitCode != 3 || res.Stdout != "" || res.Truncated {
		t.Fatalf("streamed exec: %+v, %v", res, err)
	}
	var all strings.Builder
	for _, c := range got {
		all.WriteString(c.stream + ":" + c.text)
	}
	if all.String() != "stdout:one\nstderr:two\nstdout:three\n" {
		t.Fatalf("chunks %q", all.String())
	}
	if first := got[0].at.Sub(start); first > time.Second || exited.Sub(got[0].at) < 1500*time.Millisecond {
		t.Errorf("the first chunk came %s after the start and %s before the exit: not streamed", first, exited.Sub(got[0].at))
	}

	// hostile output: bounded by MaxOutput, the rest counted
	const limit = 1 << 20
	var streamed int64
	res, err = a.c.ExecStream(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, MaxOutput: limit,
		Argv: []string{"sh", "-c", "printf '\\033[2J\\033]0;title\\007'; yes x | tr -d '\\n' | head -c 100000000"}},
		func(stream string, p []byte) { streamed += int64(len(p)) })
	if err != nil || streamed != limit || !res.Truncated || res.DroppedBytes != int64(100000000+len("\033[2J\033]0;title\007")-limit) || res.ExitCode != 0 {
		t.Fatalf("100 MB: streamed %d, %+v, %v", streamed, res, err)
	}

	// the buffered form is unchanged
	b, err := a.c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", "echo out; echo err >&2"}})
	if err != nil || b.Stdout != "out\n" || b.Stderr != "err\n" {
		t.Fatalf("buffered exec: %+v, %v", b, err)
	}
	// refusals before any output are the buffered form's statuses
	var ae *runtimeapi.APIError
	if _, err := a.c.ExecStream(ctx, g.RunID, runtimeapi.ExecBody{Token: "wrong", Argv: []string{"true"}}, func(string, []byte) {}); !errors.As(err, &ae) || ae.Status/100 != 4 {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := a.c.ExecStream(ctx, "r-none", runtimeapi.ExecBody{Token: g.Token, Argv: []string{"true"}}, func(string, []byte) {}); !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("no claim: %v", err)
	}
}
