package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/pool"
	"github.com/slipway-dev/slipway/pkg/rollout"
	"github.com/slipway-dev/slipway/pkg/runtime"
)

// leakyFleet is the real runtime's client whose network proof reports a
// connection, as a sandbox with network would. A fake, because the local
// backend cannot make a sandbox with network: it always unshares it.
type leakyFleet struct{ *runtime.Client }

func (f leakyFleet) Prove(ctx context.Context, pool string, req runtime.ProofRequest) (*runtime.ProofResult, error) {
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
