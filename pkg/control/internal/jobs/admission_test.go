package jobs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/internal/store"
)

func TestSubmitIdempotent(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		p := newEngine(t, s, repo, 8)
		spec := controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: "build-42", DeadlineSeconds: 60}
		var wg sync.WaitGroup
		ids := make(chan string, 20)
		created := make(chan bool, 20)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j, c, err := p.Submit(ctx, "globex", "", spec)
				if err != nil {
					t.Error(err)
					return
				}
				ids <- j.ID
				created <- c
			}()
		}
		wg.Wait()
		close(ids)
		close(created)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		n := 0
		for c := range created {
			if c {
				n++
			}
		}
		if len(seen) != 1 || n != 1 {
			t.Fatalf("20 submits with one key made jobs %v (%d created), want one", seen, n)
		}
		spec.Commands = cmd("false")
		_, _, err := p.Submit(ctx, "globex", "", spec)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("key reused with another request: %v", err)
		}
		wantErr(t, err, "build-42", "different request")
		// The same key of another tenant is another job.
		spec.Commands = cmd("true")
		spec.Profile = "short"
		spec.DeadlineSeconds = 1
		j, c, err := p.Submit(ctx, "acme", "", spec)
		if err != nil || !c || seen[j.ID] {
			t.Fatalf("acme's job with globex's key: %+v %v %v", j, c, err)
		}
	})
}

func TestSubmitRefusals(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		p := newEngine(t, s, repo, 8)
		for name, c := range map[string]struct {
			tenant string
			spec   controlapi.Spec
			is     error
			says   []string
		}{
			"unknown pool":       {"acme", controlapi.Spec{Pool: "gpu", Profile: "standard", Commands: cmd("true")}, store.ErrBadRequest, []string{`unknown pool "gpu"`}},
			"unknown profile":    {"acme", controlapi.Spec{Pool: "agents", Profile: "huge", Commands: cmd("true")}, store.ErrBadRequest, []string{`unknown profile "huge"`, "profiles/huge.yaml"}},
			"profile not theirs": {"globex", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true")}, store.ErrForbidden, []string{"short"}},
			"pool not theirs":    {"acme", controlapi.Spec{Pool: "unpriced", Profile: "standard", Commands: cmd("true")}, store.ErrForbidden, []string{"unpriced"}},
			"undeclared tenant":  {"initech", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")}, store.ErrForbidden, []string{"tenants/initech.yaml"}},
			"deadline over max":  {"acme", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), DeadlineSeconds: 60}, store.ErrBadRequest, []string{"deadline 1m0s exceeds profile short's maxDuration 5s", "profiles/short.yaml"}},
			"no command":         {"acme", controlapi.Spec{Pool: "agents", Profile: "short"}, store.ErrBadRequest, []string{"at least one command"}},
			"empty command":      {"acme", controlapi.Spec{Pool: "agents", Profile: "short", Commands: [][]string{{}}}, store.ErrBadRequest, []string{"commands[0]: empty"}},
			"bad key":            {"acme", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), IdempotencyKey: "a b"}, store.ErrBadRequest, []string{`"a b"`}},
			"budget":             {"acme", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), DeadlineSeconds: 120}, nil, nil},
		} {
			if c.is == nil {
				continue
			}
			_, _, err := p.Submit(ctx, c.tenant, "", c.spec)
			if !errors.Is(err, c.is) {
				t.Errorf("%s: %v, want %v", name, err, c.is)
				continue
			}
			wantErr(t, err, c.says...)
		}
		if js, _ := s.List(ctx, store.ListFilter{}); len(js) != 0 {
			t.Fatalf("refused submissions stored %d jobs", len(js))
		}

		// Budget: 5 credits a day; 2 minutes at 60/h is 2 credits: two
		// jobs fit, the third does not (429 with the numbers).
		for i := range 2 {
			if _, _, err := p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint("b", i)}); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
		var le *store.LimitError
		if !errors.As(err, &le) || le.Reason != "budget" {
			t.Fatalf("over budget: %v", err)
		}
		wantErr(t, err, "worst case 2.0000 credits", "budget of 5.0000 credits", "reserved by queued and running jobs 4.0000")

		// A new budget period: the first job in it zeroes what the last
		// one spent and records the period, in the statement that counts
		// the job.
		var period int64
		if err := s.WriteDB().QueryRowContext(ctx, `SELECT period_ns FROM cp_tenants WHERE tenant = 'acme'`).Scan(&period); err != nil || period == 0 {
			t.Fatalf("acme's budget period: %d %v", period, err)
		}
		if _, err := s.WriteDB().ExecContext(ctx, s.Q(`UPDATE cp_tenants SET spent = 0.5, period_ns = ? WHERE tenant = 'acme'`), period-1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), IdempotencyKey: "q-rolled"}); err != nil {
			t.Fatal(err)
		}
		var spent float64
		var now int64
		if err := s.WriteDB().QueryRowContext(ctx, `SELECT spent, period_ns FROM cp_tenants WHERE tenant = 'acme'`).Scan(&spent, &now); err != nil || spent != 0 || now != period {
			t.Fatalf("after a new period's first job: spent %v, period %d (want 0, %d): %v", spent, now, period, err)
		}

		// Queue bound: acme's is 5; short jobs cost 5s at 60/h each.
		for i := range 2 {
			if _, _, err := p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), IdempotencyKey: fmt.Sprint("q", i)}); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err = p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true")})
		if !errors.As(err, &le) || le.Reason != "tenant_queue_full" || le.RetryAfter <= 0 {
			t.Fatalf("over the queue bound: %v", err)
		}
		wantErr(t, err, "tenant acme has 5 queued jobs, its queue bound is 5")

		// A pool without a price: known as unknown, never zero; refused
		// only for a tenant with a budget.
		j, _, err := p.Submit(ctx, "globex", "", controlapi.Spec{Pool: "unpriced", Profile: "standard", Commands: cmd("true")})
		if err != nil || j.Cost.Known {
			t.Fatalf("unpriced job: %+v %v", j, err)
		}
		us, _ := s.Usage(ctx)
		t.Logf("usage: %+v", us)
	})
}

func TestGlobalQueueBound(t *testing.T) {
	repo := configRepo(t)
	s, err := store.OpenSQLite(context.Background(), t.TempDir()+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newEngine(t, s, repo, 8)
	p.c.QueueBound = 3
	for i := range 3 {
		if _, _, err := p.Submit(context.Background(), "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = p.Submit(context.Background(), "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
	var le *store.LimitError
	if !errors.As(err, &le) || le.Reason != "queue_full" {
		t.Fatalf("over the global bound: %v", err)
	}
	if u, _ := s.Usage(context.Background()); len(u) != 1 || u[0].Queued != 3 {
		t.Fatalf("a refused submit changed the counters: %+v", u)
	}
}

// TestQueueBoundAcrossReplicas: a replica whose last batch left the queue
// far from its bound skips the early read, and still refuses once another
// replica filled the queue: its batch reads the counters in its own
// transaction.
func TestQueueBoundAcrossReplicas(t *testing.T) {
	repo := configRepo(t)
	path := filepath.Join(t.TempDir(), "c.db")
	var ps []*Engine
	for range 2 {
		s, err := store.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		p := newEngine(t, s, repo, 8)
		p.c.QueueBound = 4
		ps = append(ps, p)
	}
	submit := func(p *Engine, key string) error {
		_, _, err := p.Submit(context.Background(), "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: key})
		return err
	}
	if err := submit(ps[0], "a0"); err != nil {
		t.Fatal(err)
	}
	if !ps[0].c.Store.FarFromBounds(submission{Job: &controlapi.Job{Tenant: "globex"}, GlobalBound: 4, TenantBound: 200}) {
		t.Fatal("one job queued of a bound of 4: the early read is not skipped")
	}
	for i := range 3 {
		if err := submit(ps[1], fmt.Sprint("b", i)); err != nil {
			t.Fatal(err)
		}
	}
	err := submit(ps[0], "a1")
	var le *store.LimitError
	if !errors.As(err, &le) || le.Reason != "queue_full" {
		t.Fatalf("the first replica over the bound the second filled: %v", err)
	}
	if u, _ := ps[0].c.Store.Usage(context.Background()); len(u) != 1 || u[0].Queued != 4 {
		t.Fatalf("counters after the refusal: %+v", u)
	}
	if ps[0].c.Store.FarFromBounds(submission{Job: &controlapi.Job{Tenant: "globex"}, GlobalBound: 4, TenantBound: 200}) {
		t.Fatal("after a refusal at the bound the early read is still skipped")
	}
}

// finish ends an admitted job as a dispatcher would.
func finish(t *testing.T, s *store.Store, id string) {
	t.Helper()
	if _, err := s.Update(context.Background(), id, func(j *controlapi.Job, l *store.Lease) error {
		j.State, j.Reason, j.EndedAt = controlapi.Succeeded, "exit_code", tp(time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A tenant that floods the queue gets its share of the slots, not all of
// them: the other tenant's few jobs are admitted among the first, not after
// the flood.
func TestAdmissionFair(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		p := newEngine(t, s, repo, 3)
		for i := range 40 {
			if _, _, err := p.Submit(ctx, "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint("g", i)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 4 {
			if _, _, err := p.Submit(ctx, "acme", "", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true"), IdempotencyKey: fmt.Sprint("a", i)}); err != nil {
				t.Fatal(err)
			}
		}
		var order []string // tenants in the order their jobs were admitted
		var admitted []string
		seen := map[string]bool{}
		for round := 0; round < 200 && len(order) < 44; round++ {
			if _, err := p.AdmitOnce(ctx); err != nil {
				t.Fatal(err)
			}
			js, err := s.List(ctx, store.ListFilter{State: controlapi.Admitted, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(js) > 3 {
				t.Fatalf("%d admitted at once, the plane's bound is 3", len(js))
			}
			per := map[string]int{}
			for i := len(js) - 1; i >= 0; i-- {
				j := js[i]
				per[j.Tenant]++
				if !seen[j.ID] {
					seen[j.ID] = true
					order = append(order, j.Tenant)
					admitted = append(admitted, j.ID)
				}
			}
			if per["acme"] > 2 || per["globex"] > 2 {
				t.Fatalf("over a tenant's concurrency of 2: %v", per)
			}
			// the job admitted first finishes first: one slot frees a round
			for len(admitted) > 0 {
				id := admitted[0]
				admitted = admitted[1:]
				if j, _ := s.Get(ctx, "", id); j != nil && j.State == controlapi.Admitted {
					finish(t, s, id)
					break
				}
			}
		}
		last := 0
		for i, tn := range order {
			if tn == "acme" {
				last = i
			}
		}
		if last > 10 {
			t.Fatalf("acme's 4 jobs finished by position %d among %v: the flood delayed them", last, order)
		}
		t.Logf("order: %v", order)
	})
}

// A profile changed or deleted after submission never changes the job
// silently: the job keeps the profile it resolved, says so, and shows it as
// it was.
func TestProfileHistory(t *testing.T) {
	repo := configRepo(t)
	s, err := store.OpenSQLite(context.Background(), t.TempDir()+"/c.db")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := newEngine(t, s, repo, 8)
	j, _, err := p.Submit(ctx, "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, repo, "standard: 1 minute", func(tr *gitops.Tree) error {
		return tr.WriteFile("profiles/standard.yaml", []byte(strings.Replace(fixture(t, "profiles/standard.yaml"), "maxDuration: 2m", "maxDuration: 1m", 1)))
	})
	if _, err := p.AdmitOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "globex", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != controlapi.Admitted || len(got.Notes) != 1 || !strings.Contains(got.Notes[0].Text, "profile standard changed at") {
		t.Fatalf("admitted job after the profile changed: %s %+v", got.State, got.Notes)
	}
	commit(t, repo, "remove standard", func(tr *gitops.Tree) error {
		if err := tr.Remove("profiles/standard.yaml"); err != nil {
			return err
		}
		if err := tr.WriteFile("tenants/acme.yaml", []byte(strings.Replace(fixture(t, "tenants/acme.yaml"), "profiles: [standard, short]", "profiles: [short]", 1))); err != nil {
			return err
		}
		return tr.WriteFile("tenants/globex.yaml", []byte(strings.Replace(fixture(t, "tenants/globex.yaml"), "profiles: [standard]", "profiles: [short]", 1)))
	})
	jp, err := p.Profile(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if jp.Profile.MaxDuration != 2*time.Minute || !strings.HasPrefix(jp.Current, "deleted at") || jp.Ref.Digest != j.Profile.Digest {
		t.Fatalf("old job's profile: %+v", jp)
	}
	if _, err := s.Get(ctx, "acme", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's job: %v", err)
	}
}

// A submission that finds a free slot is admitted in its own transaction:
// no wake-up, no second transaction between submission and admission.
func TestAdmitOnSubmit(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		p := newEngine(t, s, repo, 3)
		p.c.ManualAdmission = false
		var ids []string
		for i := range 4 {
			j, _, err := p.Submit(ctx, "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true"), IdempotencyKey: fmt.Sprint(i)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		states := map[controlapi.State]int{}
		for _, id := range ids {
			j, err := s.Get(ctx, "", id)
			if err != nil {
				t.Fatal(err)
			}
			states[j.State]++
			if j.State == controlapi.Admitted && j.AdmittedAt.Sub(j.CreatedAt) > time.Second {
				t.Errorf("job %s waited %v in the queue with a slot free", id, j.AdmittedAt.Sub(j.CreatedAt))
			}
		}
		// globex's concurrency is 2: two admitted at once, two wait
		if states[controlapi.Admitted] != 2 || states[controlapi.Queued] != 2 {
			t.Fatalf("states after 4 submissions: %v", states)
		}
	})
}

// A queued job's cancellation settles every step at once: the ones with
// nothing to do say so.
func TestCancelQueued(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		p := newEngine(t, s, repo, 8)
		j, _, err := p.Submit(ctx, "globex", "", controlapi.Spec{Pool: "agents", Profile: "standard", Commands: cmd("true")})
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Cancel(ctx, "globex", j.ID, "", "")
		if err != nil {
			t.Fatal(err)
		}
		c := got.Cancellation
		if got.State != controlapi.Canceled || c == nil || c.Fence != 1 || len(c.Steps) != 10 {
			t.Fatalf("canceled queued job: %s %+v", got.State, c)
		}
		for i, want := range []string{controlapi.StepRequest, controlapi.StepStopCommands, controlapi.StepSignalRunner, controlapi.StepEndWork, controlapi.StepReconcileDeliveries,
			controlapi.StepCheckpoint, controlapi.StepCleanupHooks, controlapi.StepRevoke, controlapi.StepDeleteSandbox, controlapi.StepFinal} {
			if c.Steps[i].Step != want || c.Steps[i].Outcome == controlapi.StepFailed {
				t.Errorf("step %d: %+v, want %s", i, c.Steps[i], want)
			}
		}
		if u, _ := s.Usage(ctx); len(u) != 1 || u[0].Queued != 0 || u[0].Active != 0 {
			t.Fatalf("counters after the cancel: %+v", u)
		}
		if _, err := p.Cancel(ctx, "globex", j.ID, "", ""); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("canceling a canceled job: %v", err)
		}
	})
}

// A tenant at or over its fair share leaves the reserve (MaxActive/4);
// with a backlog (more queued than it may start) it also leaves a slot for
// each other tenant with work in the last minute below its share, whichever
// is more; alone it takes every slot.
func TestAdmissionReserve(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *store.Store) {
		repo := configRepo(t)
		commit(t, repo, "globex: 8 at once; initech and hooli", func(tr *gitops.Tree) error {
			for _, name := range []string{"initech", "hooli"} {
				if err := tr.WriteFile("tenants/"+name+".yaml", []byte(strings.Replace(fixture(t, "tenants/acme.yaml"), "name: acme", "name: "+name, 1))); err != nil {
					return err
				}
			}
			return tr.WriteFile("tenants/globex.yaml", []byte(strings.Replace(fixture(t, "tenants/globex.yaml"), "concurrency: 2", "concurrency: 8", 1)))
		})
		ctx := context.Background()
		p := newEngine(t, s, repo, 8)
		submit := func(tenant, profile string, n int, key string) {
			t.Helper()
			for i := range n {
				if _, _, err := p.Submit(ctx, tenant, "", controlapi.Spec{Pool: "agents", Profile: profile, Commands: cmd("true"), IdempotencyKey: fmt.Sprint(key, i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		active := func() map[string][]string {
			t.Helper()
			if _, err := p.AdmitOnce(ctx); err != nil {
				t.Fatal(err)
			}
			js, err := s.List(ctx, store.ListFilter{State: controlapi.Admitted, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			per := map[string][]string{}
			for _, j := range js {
				per[j.Tenant] = append(per[j.Tenant], j.ID)
			}
			return per
		}
		drain := func(tenant string) {
			t.Helper()
			for ids := active()[tenant]; len(ids) > 0; ids = active()[tenant] {
				for _, id := range ids {
					finish(t, s, id)
				}
			}
		}
		submit("globex", "standard", 10, "alone")
		if per := active(); len(per["globex"]) != 8 {
			t.Fatalf("a tenant alone: %d of 8 slots, want all", len(per["globex"]))
		}
		drain("globex") // the rest of the ten
		submit("acme", "short", 1, "a")
		drain("acme") // acme had work a moment ago: it shares the slots
		submit("globex", "standard", 10, "flood")
		if per := active(); len(per["globex"]) != 6 {
			t.Fatalf("with acme sharing: globex has %d slots, want 6 (the reserve of 2 kept)", len(per["globex"]))
		}
		submit("acme", "short", 2, "b")
		if per := active(); len(per["acme"]) != 2 || len(per["globex"]) != 6 {
			t.Fatalf("acme arriving under its share: %d at once (globex %d), want 2 at once", len(per["acme"]), len(per["globex"]))
		}
		drain("acme")
		drain("globex")
		// Three tenants under their share (8 slots / 4 tenants = 2) had
		// work: globex leaves a slot for each, more than the fixed two.
		for _, name := range []string{"initech", "hooli"} {
			submit(name, "short", 1, name)
			drain(name)
		}
		submit("globex", "standard", 10, "second-flood")
		if per := active(); len(per["globex"]) != 5 {
			t.Fatalf("with three tenants under their share: globex has %d slots, want 5 (3 kept)", len(per["globex"]))
		}
		for _, name := range []string{"acme", "initech", "hooli"} {
			submit(name, "short", 1, name+"-again")
		}
		if per := active(); len(per["acme"]) != 1 || len(per["initech"]) != 1 || len(per["hooli"]) != 1 || len(per["globex"]) != 5 {
			t.Fatalf("the three arriving at once: %v, want one each at once and globex's 5", per)
		}
		for _, name := range []string{"acme", "initech", "hooli", "globex"} {
			drain(name)
		}
		// A burst is not a flood: while globex's queue fits its free
		// concurrency, it leaves the reserve only, not a slot for each of
		// the three (the plane's slots are not held idle for them).
		for k := 1; k <= 6; k++ {
			submit("globex", "standard", 1, fmt.Sprint("burst", k))
			if per := active(); len(per["globex"]) != k {
				t.Fatalf("globex's burst, job %d: %d active, want %d (8 slots, the reserve of 2 kept)", k, len(per["globex"]), k)
			}
		}
		submit("globex", "standard", 1, "burst7")
		if per := active(); len(per["globex"]) != 6 {
			t.Fatalf("globex's seventh: %d active, want 6 (the reserve of 2 kept)", len(per["globex"]))
		}
		// Now a backlog: more queued than its concurrency lets it start.
		// A freed slot of its own is left to the three under their share.
		submit("globex", "standard", 3, "backlog")
		finish(t, s, active()["globex"][0])
		if per := active(); len(per["globex"]) != 5 {
			t.Fatalf("globex with a backlog of 4: %d active, want 5 (a slot for each of the three kept)", len(per["globex"]))
		}
		for _, name := range []string{"acme", "initech", "hooli", "globex"} {
			drain(name)
		}
		// A burst takes one slot beyond the tenant's share even from the
		// reserve; a freed slot then goes to a tenant below its share.
		submit("acme", "short", 2, "full")
		submit("initech", "short", 2, "full")
		submit("hooli", "short", 1, "full")
		submit("globex", "standard", 2, "full")
		if per := active(); len(per["globex"]) != 2 || len(per["acme"])+len(per["initech"])+len(per["hooli"]) != 5 {
			t.Fatalf("seven of eight: %v", per)
		}
		submit("globex", "standard", 1, "one-beyond")
		if per := active(); len(per["globex"]) != 3 {
			t.Fatalf("globex at its share (2) with one more queued and one slot free: %d active, want 3", len(per["globex"]))
		}
		submit("hooli", "short", 1, "full-2")
		if per := active(); len(per["hooli"]) != 1 {
			t.Fatalf("hooli on a full plane: %d active, want 1", len(per["hooli"]))
		}
		finish(t, s, active()["globex"][0])
		if per := active(); len(per["hooli"]) != 2 || len(per["globex"]) != 2 {
			t.Fatalf("the slot globex freed: %v, want it hooli's (below its share)", per)
		}
	})
}
