package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
)

// ErrActionInput: an operator's suspend or resume lacks its reason or
// actor, or one is malformed; the error names the field.
var ErrActionInput = errors.New("runtime: operator action")

// checkAction refuses an action without a reason or an actor, or with
// one out of bounds, naming the field.
func checkAction(a runtimeapi.OperatorAction) error {
	switch reason, actor := strings.TrimSpace(a.Reason), strings.TrimSpace(a.Actor); {
	case reason == "":
		return fmt.Errorf("%w: reason: required (say why)", ErrActionInput)
	case len(a.Reason) > runtimeapi.MaxReason:
		return fmt.Errorf("%w: reason: %d bytes, at most %d", ErrActionInput, len(a.Reason), runtimeapi.MaxReason)
	case strings.IndexFunc(a.Reason, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: reason: control characters (a line break, a tab, an escape) are not allowed", ErrActionInput)
	case actor == "":
		return fmt.Errorf("%w: actor: required (who acted, never a token)", ErrActionInput)
	case len(a.Actor) > runtimeapi.MaxActor:
		return fmt.Errorf("%w: actor: %d bytes, at most %d", ErrActionInput, len(a.Actor), runtimeapi.MaxActor)
	case strings.IndexFunc(a.Actor, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		return fmt.Errorf("%w: actor: spaces and unprintable characters are not allowed", ErrActionInput)
	}
	return nil
}

// SuspendRun is an operator's suspend of an open run: the runtime
// checkpoints it with the claim's current token (the operator holds none)
// and deletes its sandbox, as Suspend does for the holder, whose next
// request is refused with ErrSuspended. The checkpoint names no job event
// sequence (the runtime does not know it). The checkpoint store records
// the suspend with the actor and the reason (Durable reads them back). A
// suspended run is refused with ErrSuspended, an action without a reason
// or an actor with ErrActionInput, before anything is done.
func (r *Runtime) SuspendRun(ctx context.Context, runID string, a runtimeapi.OperatorAction) (*checkpoint.Checkpoint, error) {
	if err := checkAction(a); err != nil {
		return nil, err
	}
	c, unlock, err := r.checkpointClaim(runID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Under c.op no move, release or resume changes the token.
	c.mu.Lock()
	token, suspended, released := c.token, c.suspended, c.released
	c.mu.Unlock()
	switch {
	case released:
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	case suspended:
		return nil, fmt.Errorf("%w: run %s is suspended already", ErrSuspended, runID)
	}
	return r.suspend(ctx, c, CheckpointRequest{Token: token},
		checkpoint.Suspended{By: "operator", Actor: strings.TrimSpace(a.Actor), Reason: strings.TrimSpace(a.Reason)})
}

// ResumeRun is an operator's resume of a suspended run, as Resume does it
// for the holder (a new sandbox, the checkpoint verified before it is
// restored, a new attempt and token: the holder's token is fenced, as
// after a move). The restore record names the actor and the reason. A
// run that is not suspended is refused, as is an action without a reason
// or an actor (ErrActionInput), before anything is done.
func (r *Runtime) ResumeRun(ctx context.Context, runID string, a runtimeapi.OperatorAction) (*runtimeapi.ResumeResult, error) {
	if err := checkAction(a); err != nil {
		return nil, err
	}
	c, unlock, err := r.checkpointClaim(runID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c.mu.Lock()
	digest := c.checkpointID
	c.mu.Unlock()
	g, err := r.resume(ctx, c, checkpoint.Restored{By: runtimeapi.RestoredByResume, Actor: strings.TrimSpace(a.Actor), Reason: strings.TrimSpace(a.Reason)})
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ResumeResult{RunID: g.RunID, Checkpoint: digest, Generation: g.Generation, SandboxID: g.SandboxID,
		AllocationAttempt: g.AllocationAttempt}, nil
}
