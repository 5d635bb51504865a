package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/internal/idprefix"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

const token = "rollout-test-token-0123456789"

// env is a config repository with pool agents (g1 active), a real runtime
// following it (bubblewrap sandboxes), and a signing key for evidence.
type env struct {
	t      *testing.T
	w      *runtimetest.World
	repo   string
	client *runtimeapi.Client
	server string
	sv     signature.SignerVerifier
	g1     *generation.Generation
}

func newEnv(t *testing.T, spec func(*pool.Spec)) *env {
	t.Helper()
	return newEnvServe(t, spec, nil)
}

// newEnvServe is newEnv with the runtime's configuration edited by cfg.
func newEnvServe(t *testing.T, spec func(*pool.Spec), cfg func(*serve.Config)) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, w: sharedWorld(t)}
	e.repo = filepath.Join(t.TempDir(), "config.git")
	if err := gitops.InitBare(e.repo, "main"); err != nil {
		t.Fatal(err)
	}
	pl := pool.Default("agents")
	pl.Spec.WarmSize = 1
	pl.Spec.RefillPerSecond = 50
	for _, ph := range pool.Phases {
		pl.Spec.PhaseDeadlines[ph] = pool.Duration{Duration: time.Minute}
	}
	if spec != nil {
		spec(&pl.Spec)
	}
	pb, err := pool.Marshal(pl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, e.repo, "main", "agents", map[string][]byte{pool.PoolFile("agents"): pb}, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	e.g1 = e.w.Generation(t, "agents", nil, "")
	e.promote(e.g1, true)
	e.sv = sharedSigner(t)

	sctx, stop := context.WithCancel(ctx)
	addr := make(chan string, 1)
	done := make(chan error, 1)
	c := serve.Config{Repo: e.repo, State: t.TempDir(), Listen: "127.0.0.1:0", Token: token,
		SyncInterval: 200 * time.Millisecond, Verify: runtime.Verify{Skip: true}}
	if cfg != nil {
		cfg(&c)
	}
	go func() {
		done <- serve.Run(sctx, c, func(a string) { addr <- a })
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("runtime: %v", err)
		}
	})
	select {
	case a := <-addr:
		e.server = "http://" + a
		if e.client, err = runtimeapi.NewClient(e.server, token); err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("runtime: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the runtime did not start")
	}
	return e
}

func (e *env) promote(g *generation.Generation, activate bool) {
	e.t.Helper()
	if _, err := release.Promote(context.Background(), release.Promotion{Repo: e.repo, Generation: g, Activate: activate, SkipVerify: true}); err != nil {
		e.t.Fatal(err)
	}
}

// driver is a driver with a clone of its own (a Repo is for one goroutine).
func (e *env) driver() *rollout.Driver {
	e.t.Helper()
	repo, err := gitops.Open(context.Background(), e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	return &rollout.Driver{Repo: repo, Pool: "agents", Fleet: e.client, Signer: e.sv, Poll: 100 * time.Millisecond}
}

// next promotes a generation after from with a template whose tests are
// tests.
func (e *env) next(from *generation.Generation, tests ...templatemeta.Test) *generation.Generation {
	e.t.Helper()
	tpl := ""
	if len(tests) > 0 {
		tpl = e.w.TemplateWithTests(e.t, tests)
	}
	g := e.w.Generation(e.t, "agents", from, tpl)
	e.promote(g, false)
	return g
}

func (e *env) state() *pool.State {
	e.t.Helper()
	st, err := pool.ParseState([]byte(gittest.Git(e.t, e.repo, "show", "main:"+pool.StateFile("agents"))), "desired.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func stateOf(st *pool.State, id string) string {
	for _, g := range st.Generations {
		if g.ID == id {
			return g.State
		}
	}
	return ""
}

// steps lists the Slipway-Step trailers of the branch, oldest first.
func (e *env) steps() []string {
	out := gittest.Git(e.t, e.repo, "log", "--reverse", "--format=%(trailers:key=Slipway-Step,valueonly)", "main")
	var steps []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			steps = append(steps, l)
		}
	}
	return steps
}

// checkRouting asserts, commit by commit, that a generation is active only
// if it is the bootstrap generation or its rollout's evidence in that same
// commit shows every proof passed: no claim is ever routed to an
// unproven generation.
func (e *env) checkRouting() {
	e.t.Helper()
	for _, c := range strings.Fields(gittest.Git(e.t, e.repo, "rev-list", "main")) {
		b, err := gittestShow(e.t, e.repo, c+":"+pool.StateFile("agents"))
		if err != nil {
			continue
		}
		st, err := pool.ParseState(b, c)
		if err != nil {
			e.t.Fatal(err)
		}
		a, ok := st.Active()
		if !ok || a.ID == e.g1.ID {
			continue
		}
		ev := gittest.Git(e.t, e.repo, "ls-tree", "-r", "--name-only", c, pool.Dir("agents")+"/evidence/"+a.ID)
		if !strings.Contains(ev, rollout.EvidenceEnvelope) && !strings.Contains(ev, rollout.EvidenceStatement) {
			e.t.Errorf("commit %s: %s is active without evidence", c[:12], a.ID)
			continue
		}
		for _, f := range strings.Fields(ev) {
			if strings.HasSuffix(f, "/"+rollout.EvidenceFile) {
				if body := gittest.Git(e.t, e.repo, "show", c+":"+f); strings.Contains(body, `"passed": false`) {
					e.t.Errorf("commit %s: %s is active with a failed proof in %s", c[:12], a.ID, f)
				}
			}
		}
	}
}

func gittestShow(t *testing.T, dir, obj string) ([]byte, error) {
	out, err := gittest.Run(dir, "show", obj)
	return []byte(out), err
}

func TestRolloutSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	g2 := e.next(e.g1, templatemeta.Test{Name: "shell", Run: []string{"sh", "-c", "true"}})
	d := e.driver()
	if _, err := d.Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx, g2.ID, false); !errors.Is(err, rollout.ErrInProgress) {
		t.Errorf("a second start: %v", err)
	}
	// Watch every sandbox the runtime lists while the rollout runs: none
	// may ever change generation, runner or template in place.
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan map[string]string, 1)
	go func() {
		seen := map[string]string{}
		defer func() { watched <- seen }()
		for wctx.Err() == nil {
			if ps, err := e.client.PoolStatus(wctx, "agents"); err == nil {
				for _, g := range ps.Generations {
					for _, sb := range g.Sandboxes {
						what := g.ID + " " + sb.RunnerBinarySHA256 + " " + sb.TemplateID
						if was, ok := seen[sb.ID]; ok && was != what {
							t.Errorf("sandbox %s changed in place: %s → %s", sb.ID, was, what)
						}
						seen[sb.ID] = what
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	r, err := d.Run(ctx)
	stopWatch()
	if seen := <-watched; len(seen) < 2 {
		t.Errorf("the watch saw %d sandboxes", len(seen))
	}
	if err != nil {
		t.Fatalf("run: %v (%+v)", err, r)
	}
	st := e.state()
	if r.Status != pool.RolloutSucceeded || stateOf(st, g2.ID) != pool.Active || stateOf(st, e.g1.ID) != pool.Retained || st.Target != g2.ID {
		t.Fatalf("after the rollout: %+v %+v", r, st.Generations)
	}
	want := []string{"compatibility", "lease", "warm", "prove", "route", "drain", "remove", "retain"}
	if got := e.steps(); !slices.Equal(got[len(got)-len(want):], want) {
		t.Errorf("steps %v, want them to end with %v", got, want)
	}
	// The evidence is signed and names the generation.
	env, err := gittestShow(t, e.repo, "main:"+r.Evidence+"/"+rollout.EvidenceEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := sign.VerifyEnvelope(ctx, e.sv, env)
	if err != nil || stmt.GetPredicateType() != rollout.PredicateEvidence || stmt.GetSubject()[0].GetDigest()["sha256"] != strings.TrimPrefix(g2.ID, "g-") {
		t.Errorf("evidence statement: %v %v", stmt, err)
	}
	status, err := d.Status(ctx)
	if err != nil || status.Active != g2.ID || len(status.Evidence) != len(pool.Proofs) || !slices.Equal(status.Retained, []string{e.g1.ID}) {
		t.Errorf("status: %+v %v", status, err)
	}
	e.checkRouting()

	// The runtime serves g2 only, and g1's sandboxes are gone.
	ps, err := e.client.PoolStatus(ctx, "agents")
	if err != nil {
		t.Fatal(err)
	}
	if g := ps.Generation(e.g1.ID); g.Ready+g.Warming+g.Claimed != 0 {
		t.Errorf("g1 still has sandboxes: %+v", g)
	}
	grant, err := e.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "t"})
	if err != nil || grant.Generation != g2.ID {
		t.Fatalf("a claim after the rollout: %+v %v", grant, err)
	}
	if err := e.client.Release(ctx, grant.RunID, runtimeapi.ReleaseBody{Token: grant.Token}); err != nil {
		t.Fatal(err)
	}

	// Back to g1 after routing: a rollback, warmed and proved again.
	if _, err := d.Start(ctx, e.g1.ID, false); !errors.Is(err, rollout.ErrRefused) {
		t.Errorf("going back without rollback: %v", err)
	}
	back := e.driver()
	if _, err := back.Start(ctx, e.g1.ID, true); err != nil {
		t.Fatal(err)
	}
	if r, err := back.Run(ctx); err != nil || !r.Rollback {
		t.Fatalf("rollback: %+v %v", r, err)
	}
	st = e.state()
	if stateOf(st, e.g1.ID) != pool.Active || stateOf(st, g2.ID) != pool.Retained {
		t.Errorf("after the rollback: %+v", st.Generations)
	}

	// The history: both rollouts, newest first, each step from its commits.
	hist := e.history()
	if len(hist) != 2 || hist[1].ID != r.ID || hist[1].From != e.g1.ID || hist[1].To != g2.ID || hist[1].Outcome != pool.RolloutSucceeded || !hist[0].Rollback {
		t.Fatalf("history: %+v", hist)
	}
	for _, s := range hist[1].Steps {
		want := rollout.StepPassed
		if s.Number == 7 {
			want = rollout.StepRetained
		}
		if s.Result != want || s.Started.IsZero() || s.Ended.Before(s.Started) || s.Commit == "" || !s.Deadline.IsZero() {
			t.Errorf("step %d: %+v", s.Number, s)
		}
	}
	if ev := hist[1].Steps[2].Evidence; !strings.Contains(ev, "evidence in "+r.Evidence) {
		t.Errorf("step 3's evidence: %q", ev)
	}
	if ev := hist[1].Steps[6].Evidence; !strings.Contains(ev, e.g1.ID+" is retained: rollback window until ") {
		t.Errorf("step 7's evidence: %q", ev)
	}
	repo, err := gitops.Open(ctx, e.repo, gitops.WithDepth(0))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := rollout.ReadRecord(ctx, repo, "main", "agents", r.ID[:9]); err != nil || rec.ID != r.ID || len(rec.Commits) != len(hist[1].Commits) {
		t.Errorf("the rollout by prefix: %+v %v", rec, err)
	}
	if _, err := rollout.ReadRecord(ctx, repo, "main", "agents", "ro-zzzzzz"); !errors.Is(err, idprefix.ErrNoMatch) || !strings.Contains(err.Error(), "no rollout matches ro-zzzzzz in pool agents") {
		t.Errorf("an unknown rollout: %v", err)
	}
}

// history reads the pool's rollouts back from the repository's history.
func (e *env) history() []*rollout.Record {
	e.t.Helper()
	repo, err := gitops.Open(context.Background(), e.repo, gitops.WithDepth(0))
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := rollout.History(context.Background(), repo, "main", "agents")
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func TestFailedProofRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	bad := e.next(e.g1, templatemeta.Test{Name: "needs-python", Run: []string{"sh", "-c", "echo python3 missing >&2; exit 9"}})
	d := e.driver()
	if _, err := d.Start(ctx, bad.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err := d.Run(ctx)
	if !errors.Is(err, rollout.ErrRolledBack) || r.Status != pool.RolloutRolledBack || !strings.Contains(r.Reason, "needs-python exited 9") {
		t.Fatalf("run: %v, %+v", err, r)
	}
	if want := "rolled back: " + r.ID + " of pool agents: step 3, proof failed: "; !strings.Contains(err.Error(), want) {
		t.Errorf("the error does not say %q: %v", want, err)
	}
	st := e.state()
	if a, _ := st.Active(); a.ID != e.g1.ID || stateOf(st, bad.ID) != "" || st.Target != e.g1.ID {
		t.Errorf("after the rollback: %+v target %s", st.Generations, st.Target)
	}
	status, _ := d.Status(ctx)
	if status == nil || !slices.ContainsFunc(status.Evidence, func(ev runtimeapi.Evidence) bool { return ev.Check == "template-tests" && !ev.Passed }) {
		t.Errorf("the evidence does not say why: %+v", status)
	}
	e.checkRouting()
	if h := e.history(); len(h) != 1 || h[0].Outcome != pool.RolloutRolledBack || h[0].Steps[1].Result != rollout.StepPassed ||
		h[0].Steps[2].Result != rollout.StepRolledBack || !strings.Contains(h[0].Steps[2].Evidence, "needs-python exited 9") || h[0].Steps[3].Result != rollout.StepNotReached {
		t.Errorf("history of a rolled-back rollout: %+v", h)
	}
	// The runtime removes the new generation's warm capacity.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps, err := e.client.PoolStatus(ctx, "agents")
		if err == nil {
			if g := ps.Generation(bad.ID); g.Ready+g.Warming+g.Claimed == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rolled-back generation keeps sandboxes: %+v %v", ps, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestTwoDriversOneWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	g2 := e.next(e.g1)
	if _, err := e.driver().Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		d := e.driver() // its own clone, as a driver in another process
		d.Holder = fmt.Sprintf("driver-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.Run(ctx)
		}()
	}
	wg.Wait()
	ok, held := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, rollout.ErrHeld), errors.Is(err, rollout.ErrChanged):
			held++
			if !strings.Contains(err.Error(), "driver-") || !strings.Contains(err.Error(), "of pool agents") {
				t.Errorf("the loser's message does not name the holder and the pool: %v", err)
			}
		default:
			t.Errorf("driver: %v", err)
		}
	}
	if ok != 1 || held != 1 {
		t.Errorf("%d drivers succeeded, %d stopped as held: %v", ok, held, errs)
	}
	if a, _ := e.state().Active(); a.ID != g2.ID {
		t.Errorf("active %s, want %s", a.ID, g2.ID)
	}
}

func TestAbortBeforeRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	g2 := e.next(e.g1)
	d := e.driver()
	if _, err := d.Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	d.Actor = "ops-alice"
	r, err := d.Abort(ctx, "by the test")
	if err != nil || r.Status != pool.RolloutRolledBack || !strings.Contains(r.Reason, "aborted: by the test") {
		t.Fatalf("abort: %+v %v", r, err)
	}
	if a, _ := e.state().Active(); a.ID != e.g1.ID {
		t.Errorf("active %s after an abort", a.ID)
	}
	// Driving the aborted rollout by its id says how it ended, naming the
	// pool; driving "the rollout in progress" finds none, and says which
	// one ended last, how and when, without taking its outcome for its own.
	if _, err := d.Drive(ctx, r.ID); !errors.Is(err, rollout.ErrRolledBack) || !strings.Contains(err.Error(), "rolled back: "+r.ID+" of pool agents: aborted: by the test") {
		t.Errorf("driving the aborted rollout: %v", err)
	}
	// The actor and the reason are the abort commit's trailers, read back
	// from the history; the start (no actor then) records no action.
	h := e.history()
	if len(h) != 1 || len(h[0].Actions) != 1 {
		t.Fatalf("history: %+v", h)
	}
	if a := h[0].Actions[0]; a.Step != "rolled-back" || a.Actor != "ops-alice" || a.Reason != "by the test" || a.Commit != h[0].Commits[len(h[0].Commits)-1] || a.At.IsZero() {
		t.Errorf("abort action: %+v, commits %v", a, h[0].Commits)
	}
	ended := e.state().Rollout.Ended
	if ended.IsZero() {
		t.Errorf("the aborted rollout has no end time: %+v", e.state().Rollout)
	}
	got, err := d.Run(ctx)
	want := fmt.Sprintf("no rollout in progress on pool agents: the last rollout, %s (%s → %s, started %s), ended rolled-back (aborted: by the test) at %s; no rollout start has been committed since",
		r.ID, e.g1.ID, g2.ID, r.Started.Format(time.RFC3339), ended.Format(time.RFC3339))
	if !errors.Is(err, rollout.ErrNotInProgress) || errors.Is(err, rollout.ErrRolledBack) || got != nil || !strings.Contains(err.Error(), want) {
		t.Errorf("driving with nothing in progress: %+v %v\nwant the error to say %q", got, err, want)
	}
	if _, err := d.Drive(ctx, "ro-000000000000"); !errors.Is(err, rollout.ErrChanged) || !strings.Contains(err.Error(), "of pool agents") {
		t.Errorf("driving another rollout than the pool's: %v", err)
	}
	if _, err := d.Abort(ctx, "again"); !errors.Is(err, rollout.ErrNoRollout) {
		t.Errorf("a second abort: %v", err)
	}
}

// TestDrain: the old generation's open run is listed while the rollout
// waits for it (onDrainDeadline: wait), and the rollout ends once it is
// released; with onDrainDeadline: stop, the run still open at the deadline
// is stopped, listed in the commit, and its manifest says released.
func TestDrain(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"wait", "stop"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(s *pool.Spec) {
				s.OnDrainDeadline = mode
				s.DrainDeadline = pool.Duration{Duration: 2 * time.Second}
			})
			ctx := context.Background()
			var grant *runtimeapi.Grant
			deadline := time.Now().Add(30 * time.Second)
			for {
				g, err := e.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "long-task"})
				if err == nil {
					grant = g
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("claim: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			g2 := e.next(e.g1)
			d := e.driver()
			if _, err := d.Start(ctx, g2.ID, false); err != nil {
				t.Fatal(err)
			}
			type result struct {
				r   *pool.Rollout
				err error
			}
			done := make(chan result, 1)
			d2 := e.driver()
			go func() {
				r, err := d2.Run(ctx)
				done <- result{r, err}
			}()
			// The drain lists the open run (with stop, the commit that
			// stopped it lists it: checked below).
			for mode == "wait" {
				st, err := d.Status(ctx)
				if err == nil && st.Phase == rollout.PhaseDrain && slices.Contains(st.DrainingRuns, grant.RunID) {
					break
				}
				select {
				case res := <-done:
					t.Fatalf("the rollout ended while a run of g1 was open: %+v %v", res.r, res.err)
				default:
				}
				if time.Now().After(deadline.Add(60 * time.Second)) {
					t.Fatalf("no drain listing %s: %+v", grant.RunID, st)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if mode == "wait" {
				time.Sleep(3 * time.Second) // past the drain deadline: still waiting
				st, _ := d.Status(ctx)
				if st.Phase != rollout.PhaseDrain || !slices.Contains(st.DrainingRuns, grant.RunID) {
					t.Fatalf("after the deadline (wait): %+v", st)
				}
				if err := e.client.Release(ctx, grant.RunID, runtimeapi.ReleaseBody{Token: grant.Token}); err != nil {
					t.Fatal(err)
				}
			}
			res := <-done
			if res.err != nil || res.r.Status != pool.RolloutSucceeded {
				t.Fatalf("rollout: %+v %v", res.r, res.err)
			}
			log := gittest.Git(t, e.repo, "log", "--format=%B", "main")
			m, err := e.client.Run(ctx, grant.RunID)
			if err != nil {
				t.Fatal(err)
			}
			// Step 5's row (rollout status) says what the deadline did.
			step5 := e.history()[0].Steps[4]
			switch mode {
			case "wait":
				if !strings.Contains(log, "drain deadline of "+e.g1.ID) || !strings.Contains(log, "Still running: "+grant.RunID) || m.Status != "released" {
					t.Errorf("wait: manifest %s, log:\n%s", m.Status, log)
				}
				if step5.Evidence != "0 runs open on "+e.g1.ID+"; drain deadline passed: waited for 1 run ("+grant.RunID+")" {
					t.Errorf("step 5 (wait): %+v", step5)
				}
			case "stop":
				if !strings.Contains(log, "Stopped: "+grant.RunID) || m.Status != "released" || m.Lifecycle.ResourcesReleased.IsZero() {
					t.Errorf("stop: manifest %s, log:\n%s", m.Status, log)
				}
				if step5.Evidence != "0 runs open on "+e.g1.ID+"; drain deadline: 1 run stopped ("+grant.RunID+")" {
					t.Errorf("step 5 (stop): %+v", step5)
				}
			}
			e.checkRouting()
		})
	}
}

// TestActionTrailers: an operator's rollback start carries its actor and
// reason as trailers, a reason of several lines becomes one, and the
// history reads them back as the rollout's actions.
func TestActionTrailers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	g2 := e.next(e.g1)
	d := e.driver()
	d.Actor, d.Reason = "ops-bob\n", "the mirror\r\n is\tdown"
	r, err := d.Start(ctx, g2.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	h := e.history()
	if len(h) != 1 || h[0].ID != r.ID || len(h[0].Actions) != 1 {
		t.Fatalf("history: %+v", h)
	}
	if a := h[0].Actions[0]; a.Step != rollout.PhaseCompatibility || a.Actor != "ops-bob" || a.Reason != "the mirror is down" {
		t.Errorf("start action: %+v", a)
	}
}
