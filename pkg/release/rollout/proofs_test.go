package rollout_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// leakyFleet is the real runtime's client whose network proof reports a
// connection, as a sandbox with network would. A fake, because the local
// backend cannot make a sandbox with network: it always unshares it.
type leakyFleet struct{ *runtimeapi.Client }

func (f leakyFleet) Prove(ctx context.Context, pool string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error) {
	res, err := f.Client.Prove(ctx, pool, req)
	if err != nil {
		return nil, err
	}
	for i := range res.Evidence {
		if res.Evidence[i].Check == "network" {
			res.Evidence[i].Passed = false
			res.Evidence[i].Reason = "the sandbox has network where pool agents denies it: 192.0.2.2:443"
		}
	}
	return res, nil
}

// TestProofFailuresRollBack: a runner whose image lies about its binary
// never warms (the backend refuses to start it), so the rollout rolls back
// at the warm deadline; a sandbox with network where the pool denies it
// fails the network proof and rolls back. The active generation never
// changes.
func TestProofFailuresRollBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *pool.Spec) { s.PhaseDeadlines[rollout.PhaseWarm] = pool.Duration{Duration: 5 * time.Second} })
	ctx := context.Background()

	liar := e.w.Generation(t, "agents", e.g1, "")
	pins := map[generation.Kind]generation.Pin{}
	for k, p := range liar.Pins {
		pins[k] = p
	}
	pins[generation.Runner] = generation.Pin{Image: e.w.RunnerWithLabel(t, strings.Repeat("0", 64))}
	liar, err := generation.New("agents", e.g1, pins, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.promote(liar, false)
	d := e.driver()
	if _, err := d.Start(ctx, liar.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err := d.Run(ctx)
	if !errors.Is(err, rollout.ErrRolledBack) || !strings.Contains(r.Reason, "warm capacity not ready") {
		t.Fatalf("a lying runner: %v %+v", err, r)
	}

	g3 := e.next(liar)
	d = e.driver()
	d.Fleet = leakyFleet{e.client}
	if _, err := d.Start(ctx, g3.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err = d.Run(ctx)
	if !errors.Is(err, rollout.ErrRolledBack) || !strings.Contains(r.Reason, "network: the sandbox has network") {
		t.Fatalf("a sandbox with network: %v %+v", err, r)
	}
	if a, _ := e.state().Active(); a.ID != e.g1.ID {
		t.Errorf("active %s after two rollbacks", a.ID)
	}
	e.checkRouting()
}

// goneFleet answers Info through the real runtime and everything else
// through a client of an address where nothing listens: a fleet that went
// away after step 1 (the connection is really refused).
type goneFleet struct{ live, gone *runtimeapi.Client }

func (f goneFleet) Info(ctx context.Context) (*runtimeapi.Info, error) { return f.live.Info(ctx) }
func (f goneFleet) Sync(ctx context.Context) (string, error)           { return f.gone.Sync(ctx) }
func (f goneFleet) PoolStatus(ctx context.Context, p string) (*runtimeapi.PoolStatus, error) {
	return f.gone.PoolStatus(ctx, p)
}
func (f goneFleet) Prove(ctx context.Context, p string, req runtimeapi.ProofRequest) (*runtimeapi.ProofResult, error) {
	return f.gone.Prove(ctx, p, req)
}
func (f goneFleet) Stop(ctx context.Context, p, g string) (*runtimeapi.StopResult, error) {
	return f.gone.Stop(ctx, p, g)
}

// TestFleetGoneInWarmFailsResumably: a fleet that stops answering during
// the warm phase tells nothing about the new generation, so the rollout
// fails visibly at the deadline (not rolled back: nothing was observed to
// be wrong), and resume completes it once the fleet answers again.
func TestFleetGoneInWarmFailsResumably(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(s *pool.Spec) { s.PhaseDeadlines[rollout.PhaseWarm] = pool.Duration{Duration: 2 * time.Second} })
	ctx := context.Background()
	g2 := e.next(e.g1)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	gone, err := runtimeapi.NewClient("http://"+addr, token)
	if err != nil {
		t.Fatal(err)
	}
	d := e.driver()
	d.Fleet = goneFleet{live: e.client, gone: gone}
	if _, err := d.Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err := d.Run(ctx)
	if !errors.Is(err, rollout.ErrFailed) || r.Phase != rollout.PhaseWarm || !strings.Contains(r.Reason, "step 2, the fleet did not answer by the phase deadline") {
		t.Fatalf("a fleet gone in the warm phase: %v %+v", err, r)
	}
	if a, _ := e.state().Active(); a.ID != e.g1.ID {
		t.Errorf("active %s after a failed warm phase", a.ID)
	}
	// The runtime warms g2 from the warming commit meanwhile; once it
	// answers with a ready member, resume goes on from step 2.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		st, err := e.client.PoolStatus(ctx, "agents")
		if err == nil && st.Generation(g2.ID).Ready > 0 {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("g2 never warmed on the runtime: %v", err)
		}
	}
	d = e.driver()
	r, err = d.Run(ctx)
	if err != nil || r.Status != pool.RolloutSucceeded {
		t.Fatalf("resume once the fleet answers: %v %+v", err, r)
	}
	if a, _ := e.state().Active(); a.ID != g2.ID {
		t.Errorf("active %s after the resumed rollout, want %s", a.ID, g2.ID)
	}
}
