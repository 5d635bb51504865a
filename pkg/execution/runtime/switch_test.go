package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// A claim never receives a member of a generation that is not active,
// also while the active generation changes under concurrent claims: the
// desired state flips between g1 and g2 (the other one warming or
// draining) while a reconcile loop keeps both warm pools filled and eight
// goroutines claim and release through the Runtime. Every grant's
// generation was the active one at some instant of its claim, the sandbox
// it names is of that generation (its record, and its runner's own word),
// the manifest records it, no sandbox serves two claims, and no sandbox
// ever changes generation.
func TestSwitchActiveGenerationUnderConcurrentClaims(t *testing.T) {
	const (
		warmSize = 3
		claimers = 8
		switches = 8
		every    = 600 * time.Millisecond
	)
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	g1 := w.generation(t, nil)
	g2 := w.generation(t, g1)
	// The four states the switches cycle through: one generation active,
	// the other warming (a rollout in progress) or draining (just
	// replaced).
	withOther := func(d *runtime.Desired, st string) *runtime.Desired {
		d.Pools["agents"].State.Generations[1].State = st
		return d
	}
	states := []*runtime.Desired{
		w.desired(t, "g1-active-g2-warming", warmSize, g1, g2),
		withOther(w.desired(t, "g2-active-g1-draining", warmSize, g2, g1), pool.Draining),
		withOther(w.desired(t, "g1-active-g2-draining", warmSize, g1, g2), pool.Draining),
		w.desired(t, "g2-active-g1-warming", warmSize, g2, g1),
	}
	activeOf := func(d *runtime.Desired) string {
		g, _ := d.Pools["agents"].Active()
		return g.ID
	}

	// The switch log: the generation made active at each switch, with the
	// time just before the new state could be read and just after the old
	// one could no longer be.
	type switchAt struct {
		before, after time.Time
		active        string
	}
	var cur atomic.Pointer[runtime.Desired]
	var logMu sync.Mutex
	var switchLog []switchAt
	set := func(d *runtime.Desired) {
		logMu.Lock()
		defer logMu.Unlock()
		before := time.Now()
		cur.Store(d)
		switchLog = append(switchLog, switchAt{before: before, after: time.Now(), active: activeOf(d)})
	}
	set(states[0])

	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return cur.Load(), time.Now() }, warm, store, time.Minute)
	defer rt.Close()
	// Both pools warm before the claims begin.
	for {
		rep := warm.Reconcile(ctx, cur.Load())
		if len(rep.Errors) > 0 {
			t.Fatalf("reconcile: %v", rep.Errors)
		}
		if ready, _ := be.List(ctx, sandbox.Filter{Owner: sandbox.OwnerWarm, State: sandbox.StateRunning}); len(ready) >= 2*warmSize {
			break
		}
	}

	stop := make(chan struct{})
	var bg sync.WaitGroup
	// The reconcile loop.
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if rep := warm.Reconcile(ctx, cur.Load()); len(rep.Errors) > 0 {
				t.Logf("reconcile: %v", rep.Errors)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Sandboxes never change generation: every sandbox seen keeps the
	// generation it was first seen with.
	var seenMu sync.Mutex
	seen := map[string]string{} // sandbox id -> generation
	observe := func(id, gen, where string) {
		seenMu.Lock()
		defer seenMu.Unlock()
		if g, ok := seen[id]; ok && g != gen {
			t.Errorf("sandbox %s was of %s and is of %s now (%s)", id, g, gen, where)
		}
		seen[id] = gen
	}
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			all, err := be.List(ctx, sandbox.Filter{Pool: "agents"})
			if err != nil {
				t.Errorf("list: %v", err)
				continue
			}
			for _, s := range all {
				observe(s.ID, s.Generation, "list")
			}
		}
	})

	// The claimers.
	type claimed struct {
		start, end time.Time
		grant      *runtimeapi.Grant
		runnerGen  string // the generation the sandbox's runner says it serves
	}
	var grantsMu sync.Mutex
	var grants []claimed
	var claiming sync.WaitGroup
	for i := range claimers {
		claiming.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "t", SessionID: fmt.Sprintf("c%d-%d", i, n)})
				end := time.Now()
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				runnerGen := checkGrantSandbox(t, ctx, be, store, gr, observe)
				grantsMu.Lock()
				grants = append(grants, claimed{start, end, gr, runnerGen})
				grantsMu.Unlock()
				if err := rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
					t.Errorf("release %s: %v", gr.RunID, err)
				}
			}
		})
	}

	for i := 1; i <= switches; i++ {
		time.Sleep(every)
		set(states[i%len(states)])
	}
	time.Sleep(every)
	close(stop)
	claiming.Wait()
	bg.Wait()

	// Each grant's generation was active at some instant of its claim:
	// generation log[k].active is active from log[k].before until
	// log[k+1].after.
	activeDuring := func(gen string, start, end time.Time) bool {
		for k, s := range switchLog {
			until := time.Now()
			if k+1 < len(switchLog) {
				until = switchLog[k+1].after
			}
			if s.active == gen && !s.before.After(end) && !until.Before(start) {
				return true
			}
		}
		return false
	}
	byGen := map[string]int{}
	warmHits := map[string]int{}
	sandboxOf := map[string]string{} // sandbox id -> run id
	for _, c := range grants {
		gr := c.grant
		byGen[gr.Generation]++
		if gr.Warm {
			warmHits[gr.Generation]++
		}
		for _, gen := range []string{gr.Generation, c.runnerGen} {
			if gen != "" && !activeDuring(gen, c.start, c.end) {
				t.Errorf("run %s got sandbox %s of %s (warm %v), not active at any instant of its claim [%s, %s]",
					gr.RunID, gr.SandboxID, gen, gr.Warm, c.start.Format(time.StampMicro), c.end.Format(time.StampMicro))
			}
		}
		if other, ok := sandboxOf[gr.SandboxID]; ok {
			t.Errorf("sandbox %s was granted to runs %s and %s", gr.SandboxID, other, gr.RunID)
		}
		sandboxOf[gr.SandboxID] = gr.RunID
	}
	t.Logf("%d switches, %d claims: by generation %v, warm hits %v", len(switchLog)-1, len(grants), byGen, warmHits)
	// The test means something only if claims of both generations were
	// granted, warm ones among them, across the switches.
	if byGen[g1.ID] == 0 || byGen[g2.ID] == 0 || warmHits[g1.ID]+warmHits[g2.ID] == 0 {
		t.Errorf("claims by generation %v, warm hits %v: want claims of both and warm hits", byGen, warmHits)
	}
}

// checkGrantSandbox checks the claim's sandbox against its grant: the
// backend's record (found by the claim's run id as its owner), the runner's
// own identity, and the run manifest. It returns the generation the
// runner says it serves ("" when it could not tell).
func checkGrantSandbox(t *testing.T, ctx context.Context, be sandbox.Backend, store runs.Store, gr *runtimeapi.Grant, observe func(id, gen, where string)) (runnerGen string) {
	t.Helper()
	owned, err := be.List(ctx, sandbox.Filter{Owner: gr.RunID})
	if err != nil {
		t.Errorf("list %s: %v", gr.RunID, err)
		return ""
	}
	if len(owned) != 1 || owned[0].ID != gr.SandboxID {
		t.Errorf("run %s was granted sandbox %s; the backend has it owning %d sandboxes", gr.RunID, gr.SandboxID, len(owned))
		return ""
	}
	s := owned[0]
	observe(s.ID, s.Generation, "grant")
	if s.Generation != gr.Generation {
		t.Errorf("run %s was granted %s as of %s; its record says %s", gr.RunID, s.ID, gr.Generation, s.Generation)
	}
	id, err := s.Identity(ctx)
	if err != nil {
		t.Errorf("run %s: identity of %s: %v", gr.RunID, s.ID, err)
	} else {
		runnerGen = id.Generation
		if id.Generation != gr.Generation || id.SandboxID != gr.SandboxID {
			t.Errorf("run %s was granted %s of %s; its runner says it is %s of %s", gr.RunID, gr.SandboxID, gr.Generation, id.SandboxID, id.Generation)
		}
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Errorf("manifest of %s: %v", gr.RunID, err)
	} else if m.Generation != gr.Generation || m.SandboxID != gr.SandboxID || m.Warm != gr.Warm {
		t.Errorf("manifest of %s: generation %s sandbox %s warm %v; grant %+v", gr.RunID, m.Generation, m.SandboxID, m.Warm, gr)
	}
	return runnerGen
}
