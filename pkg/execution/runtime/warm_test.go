package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

// warmWorld is runtimetest's world (a real runner image and a busybox
// template in an in-process registry) with this package's pool, agents.
type warmWorld struct {
	*runtimetest.World
	host, runner, template string
}

func newWarmWorld(t testing.TB) *warmWorld {
	t.Helper()
	rw := runtimetest.New(t, registrytest.NewInProcess(t))
	return &warmWorld{World: rw, host: rw.Host, runner: rw.Runner, template: rw.Template}
}

// desired is a desired state with pool agents: generations gs, the first
// active, the others warming (as a rollout in progress has them).
func (w *warmWorld) desired(t testing.TB, rev string, warmSize int, gs ...*generation.Generation) *runtime.Desired {
	t.Helper()
	return runtimetest.Desired(rev, "agents", warmSize, gs...)
}

// generation is a generation of pool agents with the world's runner and
// template and a new control plane, following from.
func (w *warmWorld) generation(t testing.TB, from *generation.Generation) *generation.Generation {
	t.Helper()
	return w.Generation(t, "agents", from, "")
}

// newLocalBackend is a bubblewrap backend whose sandboxes are all deleted
// when the test ends.
func newLocalBackend(t testing.TB, opts ...local.Option) *local.Backend {
	t.Helper()
	be, err := local.New(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		all, _ := be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			be.Delete(ctx, s.ID)
		}
		be.Close()
	})
	return be
}

// newStore is a run store in a temporary directory, closed when the test
// ends.
func newStore(tb testing.TB) *runs.SQLite {
	tb.Helper()
	store, err := runs.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), runs.StateFile))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return store
}

func TestWarmPoolsAndClaims(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	g1 := w.generation(t, nil)
	d := w.desired(t, "r1", 2, g1)

	// Concurrent reconciles never create more than asked (own creates counted).
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); warm.Reconcile(ctx, d) }()
	}
	wg.Wait()
	members, _ := be.List(ctx, sandbox.Filter{Pool: "agents", Owner: sandbox.OwnerWarm})
	if len(members) != 2 {
		t.Fatalf("%d warm members after concurrent reconciles, want 2", len(members))
	}

	// A claim takes a warm member of the active generation, for good.
	s, hit, err := warm.Claim(ctx, d, "agents", "claim-1")
	if err != nil || !hit || s.Generation != g1.ID || s.Owner != "claim-1" {
		t.Fatalf("claim: %+v warm=%v err=%v", s, hit, err)
	}
	id, err := s.Identity(ctx)
	if err != nil || id.Generation != g1.ID {
		t.Fatalf("identity %+v, %v", id, err)
	}
	var out strings.Builder
	if st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "echo hi"}}, &out, &out); err != nil || st.ExitCode != 0 || out.String() != "hi\n" {
		t.Fatalf("exec: %+v %q %v", st, out.String(), err)
	}
	rep := warm.Reconcile(ctx, d) // refills the one taken
	if len(rep.Created) != 1 || len(rep.Errors) != 0 {
		t.Errorf("refill: %+v", rep)
	}
	if err := warm.Release(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	// A new active generation: no claim ever gets a g1 member again, and
	// g1's warm members are deleted (never changed in place).
	g2 := w.generation(t, g1)
	d2 := w.desired(t, "r2", 1, g2)
	for i := range 3 {
		s, _, err := warm.Claim(ctx, d2, "agents", fmt.Sprintf("claim-after-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if s.Generation != g2.ID {
			t.Fatalf("claim after the switch got generation %s", s.Generation)
		}
		warm.Release(ctx, s.ID)
	}
	rep = warm.Reconcile(ctx, d2)
	if len(rep.Deleted) != 2 || len(rep.Created) != 1 {
		t.Errorf("after the switch: %+v, want 2 deleted (g1) and 1 created (g2)", rep)
	}
	left, _ := be.List(ctx, sandbox.Filter{Pool: "agents"})
	for _, s := range left {
		if s.Generation != g2.ID {
			t.Errorf("sandbox %s of %s left after the switch", s.ID, s.Generation)
		}
	}
	if _, _, err := warm.Claim(ctx, &runtime.Desired{Pools: map[string]*runtime.PoolDesired{"agents": {Pool: pool.Default("agents"), State: pool.NewState("agents")}}}, "agents", "c"); err == nil {
		t.Error("a claim on a pool without an active generation succeeded")
	}
}
