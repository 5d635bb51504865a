package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/execution/checkpoint"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// Errors of checkpoints.
var (
	// ErrNoCheckpoints: the runtime has no checkpoint store and key
	// (WithCheckpoints), or its backend cannot freeze a sandbox.
	ErrNoCheckpoints = errors.New("runtime: checkpoints are not available")
	// ErrSuspended: the run is suspended; it has no sandbox until Resume.
	ErrSuspended = errors.New("runtime: the run is suspended")
	// ErrNotSuspended: a resume of a run that is not suspended.
	ErrNotSuspended = errors.New("runtime: the run is not suspended")
)

// Checkpoints is where a runtime keeps its runs' checkpoints and the key
// it signs and verifies them with.
type Checkpoints struct {
	Store    *checkpoint.Store
	Signer   signature.SignerVerifier
	Verifier signature.Verifier
	// Repository, when set, is the registry repository each checkpoint
	// is also pushed to, by digest, signed and attested with Signer
	// (ckptregistry.go); a resume whose checkpoint the Store lacks pulls
	// it from there, verified before anything is written. Keychain gives
	// the registry's credentials (nil: the docker credential keychain).
	Repository string
	Keychain   authn.Keychain
}

// WithCheckpoints lets the runtime checkpoint, suspend and resume runs
// (Checkpoint, Suspend, Resume) into cp.Store, signed with cp.Signer and
// verified with cp.Verifier before any restore.
func WithCheckpoints(cp Checkpoints) RuntimeOption {
	return func(o *runtimeOptions) {
		if cp.Store != nil && cp.Signer != nil && cp.Verifier != nil {
			o.checkpoints = &cp
		}
	}
}

// CheckpointRequest asks for a checkpoint of an open run.
type CheckpointRequest struct {
	// Token is the claim's current fencing token.
	Token string
	// EventSeq is the job's event sequence at the checkpoint, as the
	// control plane knows it (0 for a run with no job); the attestation
	// names it.
	EventSeq int64
	// EventSeqUnknown: the caller does not know the job's event sequence
	// (the drain's checkpoints); the attestation says so, EventSeq is 0.
	EventSeqUnknown bool
}

// checkpointer is how this runtime's backend gives a workspace to a
// checkpoint: a host directory (sandbox.Checkpointer) or a tar stream
// (sandbox.WorkspaceStreamer: delete and restore on Kubernetes).
func (r *Runtime) checkpointer() (workspaceAccess, *Checkpoints, error) {
	if r.o.checkpoints == nil {
		return nil, nil, fmt.Errorf("%w: no checkpoint store or key (WithCheckpoints)", ErrNoCheckpoints)
	}
	switch b := r.warm.backend.(type) {
	case sandbox.Checkpointer:
		return dirAccess{b}, r.o.checkpoints, nil
	case sandbox.WorkspaceStreamer:
		return streamAccess{b: b, staging: filepath.Join(r.o.checkpoints.Store.Dir(), StagingDir)}, r.o.checkpoints, nil
	}
	return nil, nil, fmt.Errorf("%w: the %T backend cannot freeze a sandbox", ErrNoCheckpoints, r.warm.backend)
}

// Checkpoint freezes the run's sandbox, writes its workspace as a signed
// checkpoint (incremental on the run's last one when this runtime took
// it), thaws it, and records the checkpoint's digest as the run
// manifest's workspace_checkpoint_id. The sandbox goes on running.
func (r *Runtime) Checkpoint(ctx context.Context, runID string, req CheckpointRequest) (*checkpoint.Checkpoint, error) {
	if _, _, err := r.checkpointer(); err != nil {
		return nil, err
	}
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	c.op.Lock()
	defer c.op.Unlock()
	return r.checkpoint(ctx, c, req)
}

// checkpoint is Checkpoint under c.op.
func (r *Runtime) checkpoint(ctx context.Context, c *claim, req CheckpointRequest) (*checkpoint.Checkpoint, error) {
	b, cps, err := r.checkpointer()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if err := c.check(req.Token); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	s, suspended, base := c.sandbox, c.suspended, c.ckBase
	c.mu.Unlock()
	if suspended {
		return nil, fmt.Errorf("%w: run %s: its checkpoint is %s", ErrSuspended, c.runID, c.checkpointID)
	}
	if s == nil {
		return nil, fmt.Errorf("%w: run %s has no sandbox", sandbox.ErrNotRunning, c.runID)
	}
	meta := checkpoint.Meta{Tenant: c.tenant, Pool: c.pool, RunID: c.runID, SandboxID: s.ID,
		Generation: c.gen.ID, TemplateID: s.TemplateID, EventSeq: req.EventSeq, EventSeqUnknown: req.EventSeqUnknown}
	if meta.EventSeqUnknown {
		meta.EventSeq = 0
	}
	cp, next, err := b.take(ctx, cps, s.ID, meta, base)
	if err != nil {
		return nil, fmt.Errorf("runtime: checkpoint run %s: %w", c.runID, err)
	}
	if err := r.pushCheckpoint(ctx, cps, cp.Digest); err != nil {
		return nil, fmt.Errorf("runtime: checkpoint run %s: %s taken, not published: %w", c.runID, cp.Digest, err)
	}
	c.mu.Lock()
	c.ckBase, c.checkpointID = next, cp.Digest
	c.mu.Unlock()
	if err := r.store.Update(context.WithoutCancel(ctx), c.runID, func(m *runmanifest.Manifest) error {
		m.WorkspaceCheckpointID = cp.Digest
		return nil
	}); err != nil {
		return nil, err
	}
	r.logf("runtime: run %s checkpointed as %s (sandbox %s frozen %s, %d of %d layers new)", c.runID, cp.Digest, s.ID,
		cp.Frozen.Round(time.Millisecond), cp.Predicate.Layers-cp.Predicate.Reused, cp.Predicate.Layers)
	return cp, nil
}

// Suspend checkpoints the run (Checkpoint), then deletes its sandbox: its
// capacity is free, a command running on it canceled, its credential
// revoked; the run stays open with its owner and token until Resume (a new
// attempt and token) or Release.
func (r *Runtime) Suspend(ctx context.Context, runID string, req CheckpointRequest) (*checkpoint.Checkpoint, error) {
	return r.suspendAs(ctx, runID, req, checkpoint.Suspended{By: "holder"})
}

// suspendAs is Suspend, recorded as rec says (By, and an operator's
// Actor and Reason).
func (r *Runtime) suspendAs(ctx context.Context, runID string, req CheckpointRequest, rec checkpoint.Suspended) (*checkpoint.Checkpoint, error) {
	if _, _, err := r.checkpointer(); err != nil {
		return nil, err
	}
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	c.op.Lock()
	defer c.op.Unlock()
	return r.suspend(ctx, c, req, rec)
}

// suspend is Suspend under c.op.
func (r *Runtime) suspend(ctx context.Context, c *claim, req CheckpointRequest, rec checkpoint.Suspended) (*checkpoint.Checkpoint, error) {
	runID := c.runID
	cp, err := r.checkpoint(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if err := r.holdSuspended(c, cp.Digest); err != nil {
		return nil, err
	}
	c.mu.Lock()
	old, oldCredential := c.sandbox, c.credential
	// The token stays the owner's (it releases a suspended run with it);
	// a command running on the old sandbox is canceled and refused.
	close(c.fence)
	c.fence = make(chan struct{})
	c.sandbox, c.credential, c.renewDue, c.suspended = nil, "", time.Time{}, true
	c.ckBase = nil // the next sandbox's workspace is another directory
	c.mu.Unlock()
	bg := context.WithoutCancel(ctx)
	revoked := r.revoke(bg, old, oldCredential)
	if err := r.warm.Release(bg, old.ID); err != nil {
		return nil, fmt.Errorf("runtime: suspend run %s: delete sandbox %s: %w", runID, old.ID, err)
	}
	r.flushEgress(bg, runID, old.ID)
	r.dropStaging(runID) // a resume makes it again from the checkpoint
	r.logf("runtime: run %s suspended (by %s): sandbox %s deleted, checkpoint %s", runID, rec.By, old.ID, cp.Digest)
	if err := r.store.Update(bg, runID, func(m *runmanifest.Manifest) error {
		markRevoked(m, oldCredential, revoked)
		return nil
	}); err != nil {
		return nil, err
	}
	rec.Checkpoint, rec.RunID, rec.At = cp.Digest, runID, r.now().UTC()
	if err := r.o.checkpoints.Store.RecordSuspend(rec); err != nil {
		return nil, fmt.Errorf("runtime: run %s is suspended at %s, but its suspend was not recorded: %w", runID, cp.Digest, err)
	}
	return cp, nil
}

// compatible lists the generations whose checkpoints a sandbox of target
// takes: target itself, and from (the generation the run was suspended
// on) when it is of the same pool and its runner protocol overlaps
// target's.
func compatible(target, from *generation.Generation) []string {
	out := []string{target.ID}
	if from != nil && from.ID != target.ID && from.Pool == target.Pool &&
		from.Compatibility.RunnerProtocol.Overlaps(target.Compatibility.RunnerProtocol) {
		out = append(out, from.ID)
	}
	return out
}

// Resume gives a suspended run a new sandbox of its pool's active
// generation (the one it was suspended on, or a newer compatible one),
// made with a fresh refresh phase (machine-id, host keys, random seed),
// verifies the run's checkpoint (signature, attestation, tenant, run,
// generation) and only then restores it into the new sandbox's empty
// workspace. The allocation attempt goes up and a new token is granted.
// A refused checkpoint deletes the new sandbox and leaves the run
// suspended, with the reason. The restore is recorded as the owner's
// (runtimeapi.RestoredByResume); ResumeAs records another reason.
func (r *Runtime) Resume(ctx context.Context, runID, token string) (*runtimeapi.Grant, error) {
	return r.resumeAs(ctx, runID, token, runtimeapi.RestoredByResume)
}

// resumeAs is Resume by the claim's holder, recording the restore as by.
func (r *Runtime) resumeAs(ctx context.Context, runID, token, by string) (*runtimeapi.Grant, error) {
	c, unlock, err := r.checkpointClaim(runID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c.mu.Lock()
	err = c.check(token)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, c, checkpoint.Restored{By: by})
}

// checkpointClaim is run's claim under its op lock (unlock releases it),
// once the runtime is known to keep checkpoints (ErrNoCheckpoints before
// the claim is even looked up): what a suspend or resume starts with.
func (r *Runtime) checkpointClaim(runID string) (*claim, func(), error) {
	if _, _, err := r.checkpointer(); err != nil {
		return nil, nil, err
	}
	c, err := r.lookup(runID)
	if err != nil {
		return nil, nil, err
	}
	c.op.Lock()
	return c, c.op.Unlock, nil
}

// resume is Resume under c.op, once the caller may resume c; rec is its
// restore record (By, and an operator's Actor and Reason).
func (r *Runtime) resume(ctx context.Context, c *claim, rec checkpoint.Restored) (*runtimeapi.Grant, error) {
	runID := c.runID
	b, cps, err := r.checkpointer()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	}
	suspended, digest, from := c.suspended, c.checkpointID, c.gen
	c.mu.Unlock()
	if !suspended {
		return nil, fmt.Errorf("%w: resume run %s", ErrNotSuspended, runID)
	}
	d, _ := r.desired()
	target := from
	if d != nil && d.Pools[c.pool] != nil {
		if g, ok := d.Pools[c.pool].Active(); ok {
			target = g
		}
	}
	gens := compatible(target, from)
	if target.ID != from.ID && len(gens) == 1 {
		return nil, fmt.Errorf("%w: resume run %s: the pool's active generation %s does not take checkpoints of %s (runner protocol %s against %s)",
			checkpoint.ErrRefused, runID, target.ID, from.ID, target.Compatibility.RunnerProtocol, from.Compatibility.RunnerProtocol)
	}
	// Fetch it from the registry when this store lacks it, verified
	// before it is written; verify before a sandbox is even made.
	if err := r.fetchCheckpoint(ctx, cps, digest, checkpoint.Expect{Tenant: c.tenant, Generations: gens, RunID: runID}); err != nil {
		return nil, fmt.Errorf("runtime: resume run %s: %w", runID, err)
	}
	if _, err := checkpoint.Verify(ctx, cps.Store, digest, cps.Verifier, checkpoint.Expect{Tenant: c.tenant, Generations: gens, RunID: runID}); err != nil {
		return nil, fmt.Errorf("runtime: resume run %s: %w", runID, err)
	}
	lim, err := r.boundsOf(c.pool)
	if err != nil {
		return nil, err
	}
	s, err := r.warm.create(ctx, c.pool, target, runID, false, lim)
	if err != nil {
		return nil, fmt.Errorf("runtime: resume run %s: %w", runID, err)
	}
	bg := context.WithoutCancel(ctx)
	fail := func(err error) (*runtimeapi.Grant, error) {
		_ = r.warm.Release(bg, s.ID)
		return nil, fmt.Errorf("runtime: resume run %s: %w", runID, err)
	}
	base, err := b.restore(ctx, cps, digest, checkpoint.Expect{Tenant: c.tenant, Generations: gens, RunID: runID}, s.ID)
	if err != nil {
		return fail(err)
	}
	rec.Checkpoint, rec.RunID, rec.At, rec.Into = digest, runID, r.now().UTC(), s.ID
	if err := cps.Store.RecordRestore(rec); err != nil {
		return fail(err)
	}
	var receipts []runmanifest.Receipt
	if c.secretVersion != "" {
		rc, err := r.issue(ctx, runID, c.secretVersion, s)
		if err != nil {
			return fail(err)
		}
		receipts = append(receipts, rc)
	}
	assigned := r.now()
	c.mu.Lock()
	c.sandbox, c.suspended, c.ckBase, c.gen, c.warm = s, false, base, target, false
	c.attempt++
	c.token, c.tokenSum = newToken(), ""
	if receipts != nil {
		c.credential, c.renewDue = receipts[0].SHA256Fingerprint, renewDue(receipts[0])
	}
	g := c.grant()
	c.mu.Unlock()
	r.logf("runtime: run %s resumed in sandbox %s of generation %s from checkpoint %s (allocation attempt %d)", runID, s.ID, target.ID, digest, g.AllocationAttempt)
	if err := r.dropSuspended(runID); err != nil {
		r.logf("%v", err) // a stale record holds the run suspended again after a restart, from this same checkpoint
	}
	if err := r.store.Update(bg, runID, func(m *runmanifest.Manifest) error {
		m.AllocationAttempt, m.SandboxID, m.Warm = g.AllocationAttempt, s.ID, false
		m.RunnerBinarySHA256 = s.RunnerBinarySHA256
		if s.RunnerBinarySHA256 != "" {
			m.ServedBy.Runner = &runmanifest.Process{BinarySHA256: s.RunnerBinarySHA256}
		}
		placeManifest(m, s)
		if target.ID != from.ID {
			// The run goes on on the newer generation: the manifest names
			// what serves it now (the checkpoint's attestation names the
			// generation it was taken on).
			m.Generation, m.WorkspaceTemplateID = target.ID, s.TemplateID
			if p, ok := target.Pins[generation.Runner]; ok {
				m.RunnerImageDigest = p.Identity()
			}
		}
		m.Lifecycle.SandboxAssigned, m.Lifecycle.Ready = assigned, s.Ready
		m.CredentialIssuances = append(m.CredentialIssuances, receipts...)
		return nil
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// Durable answers question 6 for a run: what a checkpoint of it holds,
// its head (the latest checkpoint the store holds of it), and the last
// verified restore of one of its checkpoints.
func (r *Runtime) Durable(ctx context.Context, runID string) (*runtimeapi.Durable, error) {
	if r.o.checkpoints == nil {
		return nil, fmt.Errorf("%w: no checkpoint store or key (WithCheckpoints)", ErrNoCheckpoints)
	}
	st := r.o.checkpoints.Store
	if _, err := r.store.Get(ctx, runID); err != nil {
		return nil, err
	}
	cps, err := st.OfRun(runID)
	if err != nil {
		return nil, err
	}
	d := &runtimeapi.Durable{RunID: runID, Durable: []string{"workspace"}, Checkpoints: len(cps)}
	if n := len(cps); n > 0 {
		head := cps[n-1]
		d.Head, d.HeadCreated, d.HeadEventSeq = head.Digest, head.Predicate.Created, head.Predicate.EventSeq
		d.HeadEventSeqUnknown = head.Predicate.EventSeqUnknown
	}
	if c, err := r.lookup(runID); err == nil {
		c.mu.Lock()
		d.Suspended = c.suspended
		c.mu.Unlock()
	}
	last, err := st.LastRestore(runID)
	if err != nil {
		return nil, err
	}
	if last != nil {
		d.LastRestore = &runtimeapi.RestoreRecord{Checkpoint: last.Checkpoint, At: last.At, By: last.By, Into: last.Into,
			Actor: last.Actor, Reason: last.Reason}
	}
	sus, err := st.LastSuspend(runID)
	if err != nil {
		return nil, err
	}
	if sus != nil {
		d.LastSuspend = &runtimeapi.SuspendRecord{Checkpoint: sus.Checkpoint, At: sus.At, By: sus.By, Actor: sus.Actor, Reason: sus.Reason}
	}
	return d, nil
}

// checkpointResult is the API's view of cp.
func checkpointResult(cp *checkpoint.Checkpoint, suspended bool) runtimeapi.CheckpointResult {
	p := cp.Predicate
	return runtimeapi.CheckpointResult{RunID: p.RunID, Checkpoint: cp.Digest, Parent: p.Parent, Generation: p.Generation,
		SandboxID: p.SandboxID, EventSeq: p.EventSeq, EventSeqUnknown: p.EventSeqUnknown, Created: p.Created, Layers: p.Layers, Reused: p.Reused,
		FrozenMillis: cp.Frozen.Milliseconds(), Suspended: suspended}
}
