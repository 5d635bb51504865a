package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// controlWorld is a config repository with pool agents (a real runner and
// busybox template), the demo's tenants, profiles and prices, and a real
// runtime process serving it.
type controlWorld struct {
	repo, dir, rtTokenFile string
	// rtRepo is the repository the runtime follows: repo, or its mirror.
	rtRepo string
	rt     *runtimeProc
}

func newControlWorld(t *testing.T) *controlWorld {
	t.Helper()
	return newControlWorldWith(t, worldOptions{})
}

// worldOptions vary a controlWorld: more pins for the generation, more
// flags for the runtime, a runtime that follows a mirror of the config
// repository (which a test can take away) instead of the repository
// itself, and more to do to the repository before the runtime starts.
type worldOptions struct {
	pins, runtimeArgs []string
	mirror            bool
	prepare           func(t *testing.T, repo string)
}

func newControlWorldWith(t *testing.T, o worldOptions) *controlWorld {
	t.Helper()
	repo, _ := runtimeConfigRepoPins(t, o.pins...)
	ctx := context.Background()
	r, err := gitops.Open(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	src := "../../../examples/demo/control"
	if _, err := r.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				return tr.WriteFile(filepath.ToSlash(rel), b)
			})
			return &gitops.Commit{Subject: "tenants, profiles, prices"}, err
		}}); err != nil {
		t.Fatal(err)
	}
	if o.prepare != nil {
		o.prepare(t, repo)
	}
	w := &controlWorld{repo: repo, dir: t.TempDir()}
	w.rtTokenFile = filepath.Join(w.dir, "runtime-token")
	if err := os.WriteFile(w.rtTokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.rtRepo = repo
	if o.mirror {
		w.rtRepo = filepath.Join(w.dir, "mirror.git")
		if out, err := exec.Command("git", "clone", "-q", "--mirror", repo, w.rtRepo).CombinedOutput(); err != nil {
			t.Fatalf("git clone --mirror: %v\n%s", err, out)
		}
	}
	w.rt = startRuntimeArgs(t, w.rtRepo, filepath.Join(w.dir, "runtime-state"), w.rtTokenFile, o.runtimeArgs...)
	w.rt.waitWarm(t, 2)
	return w
}

// token creates a tenant's token in db and returns the file holding it.
func (w *controlWorld) token(t *testing.T, db, tenant string) string {
	t.Helper()
	r := run(t, "", "tenant", "token", "create", tenant, "--db", db)
	if r.code != 0 {
		t.Fatalf("token create: %+v", r)
	}
	f := filepath.Join(w.dir, tenant+"-token")
	if err := os.WriteFile(f, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// controlProc is `slipway control serve` as a separate process.
type controlProc struct {
	cmd  *exec.Cmd
	url  string
	log  *lineLog
	done chan struct{}
}

func (w *controlWorld) startControl(t *testing.T, db string, env ...string) *controlProc {
	t.Helper()
	return w.startControlArgs(t, db, env, "--runtime", "agents="+w.rt.base+","+w.rtTokenFile)
}

func (w *controlWorld) startControlArgs(t *testing.T, db string, env []string, args ...string) *controlProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := &lineLog{t: t, addr: make(chan string, 1)}
	cmd := exec.Command(self, append([]string{"control", "serve", "--config-repo", w.repo, "--db", db, "--listen", "127.0.0.1:0",
		"--lease", "2s", "--config-refresh", "200ms", "--max-active", "1", "--grace", "1s"}, args...)...)
	cmd.Env = append(append(os.Environ(), envRunMain+"=1"), env...)
	cmd.Stderr = log
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &controlProc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	select {
	case a := <-log.addr:
		p.url = "http://" + a
		return p
	case <-p.done:
		t.Fatalf("control serve exited:\n%s", log.text())
	case <-time.After(60 * time.Second):
		t.Fatalf("control serve did not start:\n%s", log.text())
	}
	return nil
}

func (p *controlProc) kill9(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func waitJob(t *testing.T, c *controlapi.Client, id string, limit time.Duration, ok func(*controlapi.Job) bool) *controlapi.Job {
	t.Helper()
	var j *controlapi.Job
	poll(t, limit, "job "+id, func() (bool, string) {
		var err error
		if j, err = c.Get(context.Background(), id); err != nil {
			return false, err.Error()
		}
		return ok(j), string(j.State) + " " + j.Detail
	})
	return j
}

// Jobs through the real planes: exit codes, deadlines with their stop
// outcome and the output's tail, and a whole story in job show.
func TestControlJobs(t *testing.T) {
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok := w.token(t, db, "acme")
	base := []string{"job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--wait"}

	r := run(t, "", append(base, "--profile", "standard", "--", "sh", "-c", "echo hello from $(hostname); exit 3")...)
	if r.code != 3 || !strings.Contains(r.stdout, "hello from") {
		t.Fatalf("exit 3: %+v", r)
	}
	r = run(t, "", append(base, "--profile", "short", "-o", "json", "--", "sh", "-c", "trap 'echo got TERM; exit 0' TERM; i=0; while :; do i=$((i+1)); echo line $i; sleep 0.01; done")...)
	if r.code != 1 {
		t.Fatalf("deadline: %+v", r)
	}
	var j controlapi.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	if j.State != controlapi.DeadlineExceeded || j.StopOutcome != "terminated" || !strings.Contains(j.Output, "got TERM") || j.OutputDroppedLines == 0 && !strings.Contains(j.Output, "line 1\n") {
		t.Fatalf("deadline job: %s %s stop=%q dropped=%d output:\n%s", j.State, j.Detail, j.StopOutcome, j.OutputDroppedLines, j.Output)
	}
	r = run(t, "", "job", "show", j.ID, "--server", cp.url, "--token-file", tok)
	for _, want := range []string{"deadline_exceeded", "profile:  short at", "as then: network deny, maxDuration 5s", "runtime:", "run r-", "cost:", "stopped:  terminated", "story:", "allocating", "running", "ended with the result", "no workspace checkpoint"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, "", "job", "show", "j-nope", "--server", cp.url, "--token-file", tok)
	if r.code != 2 || !strings.Contains(r.stderr, "at least 6 characters after j-") {
		t.Fatalf("a short job id: %+v", r)
	}
	checkJobPrefixes(t, cp.url, tok, j.ID)
}

// checkJobPrefixes: job verbs take a unique prefix of a job's id, list the
// candidates of an ambiguous one, and completion suggests the jobs.
func checkJobPrefixes(t *testing.T, server, tok, id string) {
	t.Helper()
	api := []string{"--server", server, "--token-file", tok}
	r := run(t, "", append([]string{"job", "show", id[:len(id)-4]}, api...)...)
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("job show PREFIX: %+v", r)
	}
	if r = run(t, "", append([]string{"job", "trace", id[:len(id)-4], "-o", "json"}, api...)...); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("job trace PREFIX: %+v", r)
	}
	r = run(t, "", append([]string{"job", "show", "j-ffffffffff"}, api...)...)
	if r.code != 2 || !strings.Contains(r.stderr, "no job matches j-ffffffffff in the newest") {
		t.Fatalf("an unknown job: %+v", r)
	}
	var l struct{ Jobs []struct{ ID string } }
	if r = run(t, "", append([]string{"job", "list", "-o", "json"}, api...)...); json.Unmarshal([]byte(r.stdout), &l) != nil || len(l.Jobs) != 2 {
		t.Fatalf("job list: %+v", r)
	}
	a, b := l.Jobs[0].ID, l.Jobs[1].ID
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n >= 8 { // ids begin with their time: two jobs a few seconds apart share a prefix
		r = run(t, "", append([]string{"job", "show", a[:n]}, api...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "job "+a[:n]+" is ambiguous: it matches ") || !strings.Contains(r.stderr, a) || !strings.Contains(r.stderr, b) {
			t.Fatalf("an ambiguous job prefix: %+v", r)
		}
	}
	r = run(t, "", append([]string{"__complete", "job", "show"}, append(api, "j-")...)...)
	if r.code != 0 || !strings.Contains(r.stdout, a+"\t") || !strings.Contains(r.stdout, b+"\t") || !strings.HasSuffix(r.stdout, ":4\n") {
		t.Fatalf("job completion: %+v", r)
	}
	start := time.Now()
	r = run(t, "", "__complete", "job", "logs", "--server", "http://127.0.0.1:1", "--token-file", tok, "j-")
	if r.code != 0 || r.stdout != ":4\n" || time.Since(start) > 5*time.Second {
		t.Fatalf("job completion with no control plane: %+v after %v", r, time.Since(start))
	}
}

// Kill -9 the control plane while jobs are queued, running, and between a
// claim and its record: on restart none is lost, none runs twice, each
// ends confirmed or unknown with an owner and a deadline, and the claim
// made before the crash is adopted, not made again.
func TestControlKill9(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)

	// One slot: A runs (a marker file counts its runs), B and C wait.
	a, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: "A",
		Commands: [][]string{{"sh", "-c", "echo started; sleep 5; echo finished"}}})
	if err != nil {
		t.Fatal(err)
	}
	var queued []string
	for _, k := range []string{"B", "C"} {
		j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: k, Commands: [][]string{{"echo", k}}})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, j.ID)
	}
	waitJob(t, c, a.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })
	cp.kill9(t)

	cp = w.startControl(t, db)
	c, _ = controlapi.NewClient(cp.url, tok)
	ja := waitJob(t, c, a.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Unknown || j.State.Terminal() })
	if ja.State != controlapi.Unknown || ja.Owner == "" || ja.OwnerDeadline == nil || ja.Reason != "owner_lost" {
		t.Fatalf("job running at the kill: %s %s owner=%q", ja.State, ja.Detail, ja.Owner)
	}
	for _, id := range queued {
		j := waitJob(t, c, id, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
		if j.State != controlapi.Succeeded {
			t.Fatalf("queued at the kill: %s %s", j.State, j.Detail)
		}
	}
	m, err := w.rt.client.Run(ctx, ja.RunID)
	if err != nil || m.Status == runmanifest.StatusRunning || m.Lifecycle.ResourcesReleased.IsZero() {
		t.Fatalf("the lost job's run: %+v %v", m, err)
	}

	// The crash between a claim and its record (seed incident 2, the worker
	// crashes after create). A failpoint: the window between the runtime's
	// grant and the job's record is too narrow for a timed kill to hit, so
	// the plane blocks there and is killed -9 for real.
	cp.kill9(t)
	cp = w.startControl(t, db, "SLIPWAY_TEST_FAILPOINT=after-claim")
	c, _ = controlapi.NewClient(cp.url, tok)
	d, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: "D", Commands: [][]string{{"echo", "D ran"}}})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "the failpoint", func() (bool, string) { return strings.Contains(cp.log.text(), "failpoint reached"), "" })
	cp.kill9(t)
	cp = w.startControl(t, db)
	c, _ = controlapi.NewClient(cp.url, tok)
	jd := waitJob(t, c, d.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if jd.State != controlapi.Succeeded || !jd.Adopted || !strings.Contains(jd.Output, "D ran") {
		t.Fatalf("job claimed at the kill: %s %s adopted=%v output=%q", jd.State, jd.Detail, jd.Adopted, jd.Output)
	}
	ids, err := w.rt.client.Query(ctx, runmanifest.Query{RequestKey: jd.RequestKey})
	if err != nil || len(ids) != 1 {
		t.Fatalf("runs with request key %s: %v %v (want exactly one)", jd.RequestKey, ids, err)
	}
	// The sandbox the runtime made before the crash is the one recorded:
	// found by the durable request key, its id on the job.
	md, err := w.rt.client.Run(ctx, ids[0])
	if err != nil || md.RunID != jd.RunID || md.SandboxID == "" || md.SandboxID != jd.SandboxID || md.RequestKey != jd.RequestKey || md.AllocationAttempt != 1 {
		t.Fatalf("the adopted run %+v (job: run %s sandbox %s key %s): %v", md, jd.RunID, jd.SandboxID, jd.RequestKey, err)
	}

	// slipway incidents shows both from the durable records: the adopted
	// claim, with the one run of its key, and the job left unknown with its
	// owner and deadline.
	rep, _ := report(t, db, filepath.Join(w.dir, "runtime-state"))
	if got := of(rep, incidents.WorkerCrash, jd.ID); len(got) != 1 || !got[0].Terminal || evidence(got[0], "adopted") != "true" ||
		!strings.HasPrefix(evidence(got[0], "runs of the request key"), "1: "+jd.RunID) || !strings.Contains(evidence(got[0], "sandbox"), jd.SandboxID) {
		t.Fatalf("worker_crashes of %s: %+v", jd.ID, got)
	}
	if got := of(rep, incidents.WorkerCrash, ja.ID); len(got) != 1 || got[0].Terminal || got[0].Owner != ja.Owner || got[0].Deadline == nil || got[0].Reason != "owner_lost" {
		t.Fatalf("worker_crashes of %s: %+v", ja.ID, got)
	}
	for _, kr := range rep.Kinds {
		for _, i := range kr.Incidents {
			if i.State == "doubled" {
				t.Fatalf("a request key with two runs: %+v", i)
			}
		}
	}
	// Nothing ran twice: A's marker output appears in one run only.
	again, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: "A",
		Commands: [][]string{{"sh", "-c", "echo started; sleep 5; echo finished"}}})
	if err != nil || again.ID != a.ID {
		t.Fatalf("resubmitting A's key: %v %v", again, err)
	}
}

// A runtime that cannot be reached: the dispatch is retried with backoff
// within the budget, then the job fails with the reason.
func TestControlDispatchBudget(t *testing.T) {
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControlArgs(t, db, nil, "--runtime", "agents=http://127.0.0.1:1,"+w.rtTokenFile, "--dispatch-attempts", "3")
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)
	j, _, err := c.Submit(context.Background(), controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if j.State != controlapi.Failed || j.Reason != "dispatch_budget" || j.DispatchFailures != 3 || !strings.Contains(j.Detail, "connection refused") {
		t.Fatalf("job on an unreachable runtime: %s %s %s failures=%d", j.State, j.Reason, j.Detail, j.DispatchFailures)
	}
	if len(j.Notes) != 2 {
		t.Errorf("notes of the retries: %+v", j.Notes)
	}
}

// Two control planes on one PostgreSQL database: every job is dispatched
// once, whichever replica took it, and a replica killed mid-run leaves its
// job to the other.
func TestControlReplicasPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no PostgreSQL")
	}
	w := newControlWorld(t)
	ctx := context.Background()
	db := pgtest.New(t)
	cp1 := w.startControl(t, db)
	cp2 := w.startControl(t, db)
	tok, _ := readToken(w.token(t, db, "acme"))
	c1, _ := controlapi.NewClient(cp1.url, tok)
	c2, _ := controlapi.NewClient(cp2.url, tok)
	var ids []string
	for i := range 6 {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "echo job; sleep 0.2"}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		j := waitJob(t, c2, id, 90*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
		if j.State != controlapi.Succeeded || j.Attempt != 1 {
			t.Fatalf("job %s: %s %s attempt %d", id, j.State, j.Detail, j.Attempt)
		}
		runsOf, err := w.rt.client.Query(ctx, runmanifest.Query{RequestKey: j.RequestKey})
		if err != nil || len(runsOf) != 1 {
			t.Fatalf("job %s: runs %v %v, want exactly one", id, runsOf, err)
		}
		if n := strings.Count(j.Output, "job\n"); n != 1 {
			t.Fatalf("job %s ran %d times:\n%s", id, n, j.Output)
		}
	}
	// A long job; kill -9 whichever replica owns it: the other recovers it.
	j, _, err := c1.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sleep", "30"}}})
	if err != nil {
		t.Fatal(err)
	}
	running := waitJob(t, c1, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })
	owner, survivor := cp1, c2
	if strings.Contains(running.Replica, fmt.Sprintf(":%d:", cp2.cmd.Process.Pid)) {
		owner, survivor = cp2, c1
	} else if !strings.Contains(running.Replica, fmt.Sprintf(":%d:", cp1.cmd.Process.Pid)) {
		t.Fatalf("job runs on replica %q, neither of pids %d and %d", running.Replica, cp1.cmd.Process.Pid, cp2.cmd.Process.Pid)
	}
	owner.kill9(t)
	got := waitJob(t, survivor, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Unknown || j.State.Terminal() })
	if got.State != controlapi.Unknown || got.Reason != "owner_lost" || !strings.Contains(got.Detail, running.Replica) {
		t.Fatalf("job after its replica was killed: %s %s %s", got.State, got.Reason, got.Detail)
	}
}

// A running job whose tenant crosses the budget in effect (lowered while
// it runs) is stopped, and says why.
func TestControlBudgetStop(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControl(t, db)
	tok, _ := readToken(w.token(t, db, "acme"))
	c, _ := controlapi.NewClient(cp.url, tok)
	j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sleep", "60"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })
	r, err := gitops.Open(ctx, w.repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx, gitops.Request{Branch: "main", Author: gitops.Signature{Name: "t", Email: "t@example.invalid"},
		Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			b, err := tr.ReadFile("tenants/acme.yaml")
			if err != nil {
				return nil, err
			}
			return &gitops.Commit{Subject: "acme: a tiny budget"}, tr.WriteFile("tenants/acme.yaml", []byte(strings.Replace(string(b), "amount: 5", "amount: 0.0001", 1)))
		}}); err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
	if got.State != controlapi.Failed || got.Reason != "budget" || got.StopOutcome == "" || !got.Cost.Known || got.Cost.Amount <= 0 {
		t.Fatalf("job over the lowered budget: %s %s %s stop=%q cost=%+v", got.State, got.Reason, got.Detail, got.StopOutcome, got.Cost)
	}
}

// Cancellation as a protocol: a running job is signalled, its sandbox
// released, and it is canceled only once the runtime shows the effects;
// killed at each step, the restarted plane carries it through from the
// record.
func TestControlCancel(t *testing.T) {
	w := newControlWorld(t)
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	tok, _ := readToken(w.token(t, db, "acme"))
	for _, fp := range []string{"", "cancel.signalled", "cancel.released"} {
		t.Run("failpoint="+fp, func(t *testing.T) {
			var env []string
			if fp != "" {
				env = []string{"SLIPWAY_TEST_FAILPOINT=" + fp}
			}
			cp := w.startControl(t, db, env...)
			c, _ := controlapi.NewClient(cp.url, tok)
			j, _, err := c.Submit(ctx, controlapi.Spec{Pool: "agents", Profile: "standard", Commands: [][]string{{"sh", "-c", "echo started; sleep 60; echo never"}}})
			if err != nil {
				t.Fatal(err)
			}
			running := waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State == controlapi.Running })
			if _, err := c.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			if fp != "" {
				poll(t, 60*time.Second, "the failpoint", func() (bool, string) { return strings.Contains(cp.log.text(), "failpoint reached"), "" })
				mid, err := c.Get(ctx, j.ID)
				if err != nil || mid.State != controlapi.Canceling {
					t.Fatalf("at %s: %v %v", fp, mid.State, err)
				}
				cp.kill9(t)
				cp = w.startControl(t, db)
				c, _ = controlapi.NewClient(cp.url, tok)
			}
			got := waitJob(t, c, j.ID, 60*time.Second, func(j *controlapi.Job) bool { return j.State.Terminal() })
			if got.State != controlapi.Canceled || got.Cancellation == nil {
				t.Fatalf("canceled job: %s %s %+v", got.State, got.Detail, got.Cancellation)
			}
			outcome := map[string]string{}
			for _, s := range got.Cancellation.Steps {
				outcome[s.Step] = s.Outcome
			}
			for _, s := range []string{controlapi.StepRequest, controlapi.StepStopCommands, controlapi.StepSignalRunner, controlapi.StepEndWork,
				controlapi.StepRevoke, controlapi.StepDeleteSandbox, controlapi.StepFinal} {
				if outcome[s] != controlapi.StepDone {
					t.Errorf("step %s: %q (%+v)", s, outcome[s], got.Cancellation.Steps)
				}
			}
			if strings.Contains(got.Output, "\nnever") {
				t.Fatalf("the command ran on after the cancel:\n%s", got.Output)
			}
			for _, s := range got.Cancellation.Steps {
				if s.Step == controlapi.StepCheckpoint && (s.Outcome != controlapi.StepUnavailable || !strings.Contains(s.Detail, "keeps no checkpoints") || s.Checkpoint != "") {
					t.Errorf("checkpoint step on a runtime without checkpoints: %+v", s)
				}
			}
			m, err := w.rt.client.Run(ctx, running.RunID)
			if err != nil || m.Lifecycle.ResourcesReleased.IsZero() {
				t.Fatalf("run %s after the cancel: %+v %v", running.RunID, m, err)
			}
			if got.Checkpoint != nil {
				t.Errorf("a checkpoint in the job's record on a runtime without checkpoints: %+v", got.Checkpoint)
			}
			r := run(t, "", "job", "show", j.ID, "--server", cp.url, "--token-file", w.dir+"/acme-token")
			if !strings.Contains(r.stdout, "delete_sandbox") || !strings.Contains(r.stdout, "canceled (canceled)") || !strings.Contains(r.stdout, "no workspace checkpoint") {
				t.Errorf("job show:\n%s", r.stdout)
			}
			cp.kill9(t)
		})
	}
}
