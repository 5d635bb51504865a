package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// ping asks s's runner for a heartbeat, waiting at most timeout.
func ping(ctx context.Context, s *sandbox.Sandbox, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := s.Ping(ctx)
	return err
}

// untilReady moves the claim c (not yet granted) while its sandbox does
// not answer within readyTimeout (err is how the first ping went), until
// one does, the claim's deadline passes or maxClaimAttempts were made.
func (r *Runtime) untilReady(ctx context.Context, c *claim, err error, readyTimeout time.Duration) error {
	for err != nil {
		c.mu.Lock()
		attempt, id := c.attempt, c.sandbox.ID
		c.mu.Unlock()
		why := fmt.Sprintf("sandbox %s did not answer within the ready timeout %s: %v", id, readyTimeout, err)
		if ctx.Err() != nil || attempt >= maxClaimAttempts {
			return fmt.Errorf("runtime: run %s: no sandbox of pool %s was ready after %d attempts; the last: %s", c.runID, c.pool, attempt, why)
		}
		if _, err := r.move(ctx, c, attempt, why); err != nil {
			return err
		}
		c.mu.Lock()
		s := c.sandbox
		c.mu.Unlock()
		err = ping(ctx, s, readyTimeout)
	}
	return nil
}

// abandon ends a claim that is not granted: its credential revoked, its
// sandbox deleted, its manifest final as released, without its request key
// (a retry with the key claims anew).
func (r *Runtime) abandon(ctx context.Context, c *claim) {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	s, credential := c.sandbox, c.credential
	c.released = true
	close(c.fence)
	c.mu.Unlock()
	r.revoke(ctx, s, credential)
	if s != nil {
		_ = r.warm.Release(ctx, s.ID)
	}
	_ = r.finalUpdate(ctx, c.runID, s, func(m *runmanifest.Manifest) {
		m.Status, m.Lifecycle.ResourcesReleased = runmanifest.StatusReleased, r.now()
		// Never granted: its token never left the runtime, so no command
		// ran. Its request key did not get a claim and may be asked again
		// (the run, released, keeps its session).
		m.RequestKey = ""
	})
	r.dropStaging(c.runID)
}

// Grant returns the claim's current grant: after a move, its new sandbox,
// attempt and token. A claimant whose requests are refused with ErrFenced
// asks for it (the sandbox is a new one: what the old one held is gone).
// It waits for a move under way.
func (r *Runtime) Grant(runID string) (*runtimeapi.Grant, error) {
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, runID)
	}
	if c.sandbox == nil {
		return nil, fmt.Errorf("%w: run %s has no sandbox: its last move failed and the heartbeat monitor moves it again", sandbox.ErrNotRunning, runID)
	}
	return c.grant(), nil
}

// Move gives the claim a new sandbox (its sandbox was not ready in time, or
// its runner missed heartbeats; the runtime moves claims by itself on
// both): the allocation attempt goes up, a new token fences out every
// request of the old one (a command running on the old token is canceled
// and its result refused), the old sandbox is killed, its credential
// revoked, and the new sandbox gets a credential of its own.
func (r *Runtime) Move(ctx context.Context, runID string) (*runtimeapi.Grant, error) {
	c, err := r.lookup(runID)
	if err != nil {
		return nil, err
	}
	return r.move(ctx, c, 0, "asked")
}

// move moves c; from > 0 moves it only if its attempt is still from (a
// heartbeat's move is not repeated after another move).
func (r *Runtime) move(ctx context.Context, c *claim, from int, why string) (*runtimeapi.Grant, error) {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrNoClaim, c.runID)
	}
	if c.suspended {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: run %s: Resume gives it a sandbox", ErrSuspended, c.runID)
	}
	if from > 0 && c.attempt != from {
		g := c.grant()
		c.mu.Unlock()
		return g, nil
	}
	old, oldCredential := c.sandbox, c.credential
	c.token = newToken() // from here on the old attempt is fenced
	c.attempt++
	close(c.fence)
	c.fence = make(chan struct{})
	c.sandbox, c.credential, c.renewDue, c.warm = nil, "", time.Time{}, false
	attempt := c.attempt
	c.mu.Unlock()
	fencedAt := r.now()

	bg := context.WithoutCancel(ctx)
	oldRevoked := r.revoke(bg, old, oldCredential)
	if old != nil {
		if err := r.warm.Release(bg, old.ID); err != nil {
			c.mu.Lock()
			c.sandbox = old // still there: the next move tries to kill it again
			c.mu.Unlock()
			err = fmt.Errorf("runtime: move run %s (%s): kill sandbox %s: %w", c.runID, why, old.ID, err)
			r.logf("%v", err)
			return nil, err
		}
	}
	if old != nil {
		r.flushEgress(bg, c.runID, old.ID) // the old sandbox is gone: all its attempts are in
	}
	lim, err := r.boundsOf(c.pool)
	var s *sandbox.Sandbox
	if err == nil {
		s, err = r.warm.create(ctx, c.pool, c.gen, c.runID, false, lim)
	}
	if err != nil {
		err = fmt.Errorf("runtime: move run %s (%s) to attempt %d: %w", c.runID, why, attempt, err)
		r.logf("%v", err)
		return nil, err
	}
	var receipts []runmanifest.Receipt
	if c.secretVersion != "" {
		rc, err := r.issue(ctx, c.runID, c.secretVersion, s)
		if err != nil {
			_ = r.warm.Release(bg, s.ID)
			err = fmt.Errorf("runtime: move run %s (%s) to attempt %d: %w", c.runID, why, attempt, err)
			r.logf("%v", err)
			return nil, err
		}
		receipts = append(receipts, rc)
	}
	credentialReady := r.now() // placed in the new sandbox (when one was issued)
	assigned := r.now()
	c.mu.Lock()
	c.sandbox = s
	if receipts != nil {
		c.credential, c.renewDue = receipts[0].SHA256Fingerprint, renewDue(receipts[0])
	}
	g := c.grant()
	c.mu.Unlock()
	oldID := "(none)"
	if old != nil {
		oldID = old.ID
	}
	r.runLog(ctx, slog.LevelWarn, c, "claim moved", textf("runtime: run %s moved from sandbox %s to %s (allocation attempt %d): %s", c.runID, oldID, s.ID, attempt, why),
		"from_sandbox_id", oldID, "why", why)
	if err := r.store.Update(bg, c.runID, func(m *runmanifest.Manifest) error {
		m.AllocationAttempt, m.SandboxID, m.Warm = attempt, s.ID, false
		m.RunnerBinarySHA256 = s.RunnerBinarySHA256
		m.ServedBy.Runtime, m.ServedBy.Runner = r.o.self, nil // this runtime moved it, to a new runner
		if s.RunnerBinarySHA256 != "" {
			m.ServedBy.Runner = &runmanifest.Process{BinarySHA256: s.RunnerBinarySHA256}
		}
		placeManifest(m, s)
		m.Lifecycle.SandboxAssigned, m.Lifecycle.Ready = assigned, s.Ready
		markRevoked(m, oldCredential, oldRevoked)
		m.CredentialIssuances = append(m.CredentialIssuances, receipts...)
		if receipts != nil {
			m.Lifecycle.CredentialReady = credentialReady
		}
		if old != nil && len(m.Fences) < runmanifest.MaxFences {
			m.Fences = append(m.Fences, runmanifest.Fence{AllocationAttempt: attempt - 1, SandboxID: old.ID, FencedAt: fencedAt, Reason: why})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// logf writes one line to the log, one writer at a time.
func (r *Runtime) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.o.log, format+"\n", args...)
}

// heartbeat pings c's runner every interval until c is released or the
// Runtime closed, and moves c when its runner misses the configured number
// of pings in a row (a claim left without a sandbox by a failed move
// counts as missing them, so it is moved again).
func (r *Runtime) heartbeat(c *claim) {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(r.o.every)
	defer t.Stop()
	missed := 0
	// the pings of one sandbox share a connection (runner.Pinger): on a
	// cluster each connection is a pod exec, a process started in the
	// sandbox's container, which a ping a second would start a second
	var (
		pinger *runner.Pinger
		pinged *sandbox.Sandbox
	)
	drop := func() {
		if pinger != nil {
			_ = pinger.Close()
		}
		pinger, pinged = nil, nil
	}
	defer drop()
	// the connection is dialled from the grant on, not from the first
	// tick: on a busy node a pod exec may take seconds, all of them
	// counted as missed heartbeats
	c.mu.Lock()
	if s := c.sandbox; s != nil && s.Runner != nil {
		pinger, pinged = s.Runner.Pinger(), s
		pinger.Dial()
	}
	c.mu.Unlock()
	beat := func(ctx context.Context, s *sandbox.Sandbox) error {
		if s.Runner == nil {
			_, err := s.Ping(ctx) // says it is not running
			return err
		}
		if s != pinged {
			drop()
			pinger, pinged = s.Runner.Pinger(), s
		}
		_, err := pinger.Ping(ctx)
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		s, attempt, released, suspended := c.sandbox, c.attempt, c.released, c.suspended
		c.mu.Unlock()
		if released {
			continue // a Release under way; done follows
		}
		if suspended {
			missed = 0 // no sandbox by design until Resume
			drop()
			continue
		}
		r.maybeRenew(ctx, c)
		if s != nil {
			pctx, pcancel := context.WithTimeout(ctx, r.o.every)
			err := beat(pctx, s)
			pcancel()
			if err == nil {
				missed = 0
				continue
			}
		} else {
			drop() // moved away from, and no new one yet
		}
		if missed++; missed < r.o.misses {
			continue
		}
		missed = 0
		_, _ = r.move(ctx, c, attempt, fmt.Sprintf("missed %d heartbeats", r.o.misses)) // a failure is logged; the claim is moved again
	}
}
