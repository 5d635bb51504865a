package canary

import (
	"context"
	"errors"
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
)

// skipped is the error of a step that does not apply here: the round
// records it skipped, with this reason, not failed.
type skipped string

func (s skipped) Error() string { return string(s) }

// checkpoint: a file written in the workspace survives a checkpoint, a
// suspend (the sandbox deleted) and a resume into a new sandbox, and the
// runtime records the verified restore as the canary's (question 6's
// "last restore proved", by canary). The claim goes on in the new sandbox. On a runtime that keeps
// no checkpoints the step is skipped.
func (cl *claimRun) checkpoint(ctx context.Context) (string, error) {
	n := nonce()
	name := ".slipway-canary-checkpoint-" + n
	want := "slipway canary checkpoint " + n + "\n"
	if res, err := cl.exec(ctx, "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", want, name); err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("writing %s in the workspace: %s", name, failure(res, err))
	}
	g := cl.grant
	cp, err := cl.c.client.Suspend(ctx, g.RunID, runtimeapi.CheckpointBody{Token: g.Token})
	var ae *runtimeapi.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == runtimeapi.CodeNoCheckpoints:
		return "", skipped("the runtime keeps no checkpoints")
	case err != nil:
		return "", fmt.Errorf("suspend of %s: %w", g.RunID, err)
	}
	ng, err := cl.c.client.Resume(ctx, g.RunID, runtimeapi.ResumeBody{Token: g.Token, By: runtimeapi.RestoredByCanary})
	if err != nil {
		return "", fmt.Errorf("resume of %s from checkpoint %s: %w", g.RunID, cp.Checkpoint, err)
	}
	cl.grant = ng
	res, err := cl.exec(ctx, "cat", name)
	if err != nil || res.ExitCode != 0 {
		return "", fmt.Errorf("reading %s back after the resume: %s", name, failure(res, err))
	}
	if res.Stdout != want {
		return "", fmt.Errorf("%s read back %q after the resume, %q was written", name, clip(res.Stdout), want)
	}
	d, err := cl.c.client.Durable(ctx, g.RunID)
	if err != nil {
		return "", fmt.Errorf("durable state of %s: %w", g.RunID, err)
	}
	if d.LastRestore == nil || d.LastRestore.Checkpoint != cp.Checkpoint || d.LastRestore.Into != ng.SandboxID || d.LastRestore.By != runtimeapi.RestoredByCanary {
		return "", fmt.Errorf("the runtime does not record the restore of %s into %s: last restore %+v", cp.Checkpoint, ng.SandboxID, d.LastRestore)
	}
	return fmt.Sprintf("checkpoint %s (frozen %d ms) restored into sandbox %s (attempt %d), %s read back; last restore proved by %s at %s",
		cp.Checkpoint, cp.FrozenMillis, ng.SandboxID, ng.AllocationAttempt, name, d.LastRestore.By, d.LastRestore.At.UTC().Format("2006-01-02T15:04:05.000Z")), nil
}
