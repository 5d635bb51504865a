//go:build linux

package upgrade_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/deploy/internal/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// Upgrading the installed planes with jobs in flight (issue 36, item 4):
// the previous version (tools/previous-version's commit) installed as an
// operator who installed it then would have (its own overlays/ha, its
// snapshot release's images by digest, its CLI setting up the config
// repository, pool agents and tenant acme as TestInClusterJob's are set
// up; both releases signed by one test key, which the policy trusts); a
// job of 3 seconds submitted to the control plane's Service every 2
// seconds throughout; this tree's overlays/ha applied with this tree's
// images (as kubectl apply -k applies it) and both Deployments' rollouts
// awaited; then pool agents rolled (rollout start --kubeconfig --prover,
// this release's CLI) to a generation pinning this release's control
// plane and runner. No accepted job is lost (each ends terminal, or
// visibly unknown with an owner and a deadline) and none runs twice (the
// run store holds at most one run per job whose runner fetched its
// command). Every job that ended before the upgrade began, every one
// submitted between the planes' rollout and the pool's, and every one
// submitted after the pool's succeeded, and its run manifest names the
// planes that served it (the previous release's binaries before, this
// release's image and binaries between and after); every job that
// succeeded ran the runner its generation pins. It logs how many jobs
// ended which way in each phase and how long each rollout took.
func TestInClusterUpgrade(t *testing.T) {
	e := harness.Start(t, true)
	ctx := context.Background()
	next := upgradeRelease{dir: e.Rel, images: e.Images}
	prevDir, how, commit := harness.PreviousRelease(t)
	prev := upgradeRelease{dir: prevDir, images: harness.PublishSigned(t, prevDir, e.Host+"/slipway-dev", e.Signer)}
	e.Mark("previous release (" + commit[:12] + ") " + how + ", pushed")
	if prev.images["slipway"] == next.images["slipway"] {
		t.Fatalf("the previous release's slipway image is this tree's (%s): nothing to upgrade", next.images["slipway"])
	}

	// The operator's install of the previous version.
	e.Deploy, e.Rel, e.Images = previousDeploy(t, commit), prev.dir, prev.images
	control, rt, gen := e.JobPlanes(t, "ha", 2)
	checkPlanesRun(t, e, prev.images["slipway"])
	// The proofs this node can run, for the pool's rollout to the new
	// generation later: all but network (its CNI bridge enforces no
	// NetworkPolicy), as make demo-kube's.
	e.Slipway(t, "pool", "set", "--repo", e.Git.Dir("config.git"), "--pool", "agents", "proofs="+strings.Join(nodeProofs, ","))

	sub := startSubmitting(ctx, control, 2*time.Second)
	defer sub.stop()
	// Some jobs run wholly on the previous version first.
	deadline := time.Now().Add(3 * time.Minute)
	for sub.succeeded(ctx, control) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 jobs succeeded on the previous version after 3m (%s)\n%s", sub.summary(),
				harness.PodsState(t, e.C, "slipway-runtime"))
		}
		time.Sleep(time.Second)
	}

	// The upgrade: this tree's overlays/ha, this tree's images.
	e.Deploy, e.Rel, e.Images = filepath.Join(harness.Root(t), "deploy"), next.dir, next.images
	applyAt := time.Now()
	e.ApplyPlanes(t, "ha", e.JobSettings(), e.PlaneSecrets())
	for _, d := range []string{"slipway-control", "slipway-runtime"} {
		waitRolledOut(t, e, d, 2)
	}
	rolledAt := time.Now()
	checkPlanesRun(t, e, next.images["slipway"])
	e.Mark(fmt.Sprintf("both planes rolled out in %s", rolledAt.Sub(applyAt).Round(100*time.Millisecond)))
	// This tree's planes with the previous runner (the pool's generation)
	// for a while, then the pool rolled to a generation that pins this
	// release's control plane and runner, and jobs for a while after.
	time.Sleep(15 * time.Second)
	poolAt := time.Now()
	gen2 := rollPool(t, e, gen, next)
	poolDone := time.Now()
	e.Mark(fmt.Sprintf("pool rolled to %s in %s", gen2, poolDone.Sub(poolAt).Round(100*time.Millisecond)))
	time.Sleep(20 * time.Second)
	sub.stop()
	accepted, refused := sub.results()
	if len(refused) > 0 {
		t.Logf("%d submissions never accepted (asked again with the same key for 30 s): %v", len(refused), refused)
	}

	final := awaitEnds(t, ctx, control, accepted, 4*time.Minute)
	// Runs per job, from the run store through the runtime's Service.
	var runIDs []string
	for _, g := range []string{gen, gen2} {
		ids, err := rt.Query(ctx, runmanifest.Query{Generation: g})
		if err != nil {
			t.Fatalf("GET /v1/runs?generation=%s from Service slipway-runtime: %v", g, err)
		}
		runIDs = append(runIDs, ids...)
	}
	runnerOf := map[string]upgradeRelease{gen: prev, gen2: next}
	ran := map[string][]string{}
	manifests := map[string]*runmanifest.Manifest{}
	for _, r := range runIDs {
		m, err := rt.Run(ctx, r)
		if err != nil {
			t.Fatalf("run %s: %v", r, err)
		}
		manifests[r] = m
		if !m.Lifecycle.PayloadFetched.IsZero() {
			ran[m.SessionID] = append(ran[m.SessionID], r)
		}
	}
	phases := map[string]map[string]int{}
	lost, twice := 0, 0
	for _, s := range accepted {
		j := final[s.id]
		if j == nil {
			lost++
			last, err := control.Get(ctx, s.id)
			t.Errorf("job %s (%s): neither terminal nor unknown with an owner after 4m: %+v (%v)", s.id, s.key, last, err)
			continue
		}
		if len(ran[s.id]) > 1 {
			twice++
			t.Errorf("job %s ran in %d runs: %v", s.id, len(ran[s.id]), ran[s.id])
		}
		// before: ended before the planes' upgrade began; planes: submitted
		// once both planes had rolled out, before the pool's rollout; after:
		// submitted once the pool's rollout had succeeded; during: the rest.
		phase := "during"
		switch {
		case j.EndedAt != nil && j.EndedAt.Before(applyAt):
			phase = "before"
		case s.at.After(rolledAt) && s.at.Before(poolAt):
			phase = "planes"
		case s.at.After(poolDone):
			phase = "after"
		}
		if phases[phase] == nil {
			phases[phase] = map[string]int{}
		}
		phases[phase][string(j.State)]++
		m := manifests[j.RunID]
		if phase == "during" {
			if m != nil {
				t.Logf("job %s (during): %s, control plane %s, runtime %s, generation %s", j.ID, j.State,
					servedBy(t, m.ServedBy.ControlPlane, prev, next), servedBy(t, m.ServedBy.Runtime, prev, next), m.Generation)
			} else {
				t.Logf("job %s (during): %s (%s: %s), no run; attempt %d, accepted %s, admitted %s, ended %s (times from the planes' upgrade)",
					j.ID, j.State, j.Reason, j.Detail, j.Attempt, s.at.Sub(applyAt).Round(100*time.Millisecond), since(j.AdmittedAt, applyAt), since(j.EndedAt, applyAt))
			}
		}
		if phase != "during" && (j.State != controlapi.Succeeded || m == nil) {
			t.Errorf("job %s (%s the upgrade): %s (%s: %s), run %q (manifest found: %v)", j.ID, phase, j.State, j.Reason, j.Detail, j.RunID, m != nil)
			continue
		}
		if j.State != controlapi.Succeeded || m == nil {
			continue
		}
		// Every job that succeeded ran the runner its generation pins.
		runner, ok := runnerOf[m.Generation]
		if !ok {
			t.Errorf("job %s ran on generation %q, neither %s nor %s", j.ID, m.Generation, gen, gen2)
			continue
		}
		harness.CheckRunner(t, "job "+j.ID+", ", runner.dir, runner.images, m)
		switch phase {
		case "before":
			harness.CheckPlanes(t, "job "+j.ID+" (before, the previous release), ", prev.dir, prev.images, m, false)
		case "planes":
			harness.CheckPlanes(t, "job "+j.ID+" (planes, this release), ", next.dir, next.images, m, true)
		case "after":
			harness.CheckPlanes(t, "job "+j.ID+" (after, this release), ", next.dir, next.images, m, true)
			if m.Generation != gen2 {
				t.Errorf("job %s, submitted after the pool's rollout to %s succeeded, ran on %s", j.ID, gen2, m.Generation)
			}
			if mm := m.Mismatches(); len(mm) > 0 {
				t.Errorf("job %s (after): served_by differs from %s's pins: %v", j.ID, gen2, mm)
			}
		}
	}
	for _, p := range []string{"before", "planes", "after"} {
		if phases[p] == nil {
			t.Errorf("jobs by phase %v: none %s", phases, p)
		}
	}
	t.Logf("upgrade %s -> %s: rollout of both planes %s, pool %s -> %s %s; %d jobs accepted, %d refused, %d lost, %d run twice; by phase %v; %d runs; %s",
		prev.version(t), next.version(t), rolledAt.Sub(applyAt).Round(100*time.Millisecond), gen, gen2, poolDone.Sub(poolAt).Round(100*time.Millisecond),
		len(accepted), len(refused), lost, twice, phases, len(runIDs), strings.Join(e.Timings, ", "))
}

// since is how long after at t was, or "never".
func since(t *time.Time, at time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Sub(at).Round(100 * time.Millisecond).String()
}

// upgradeRelease is one of the two releases: its folder and its images by
// digest as pushed.
type upgradeRelease struct {
	dir    string
	images map[string]string
}

// version is what the release's CLI says it is.
func (r upgradeRelease) version(t testing.TB) string {
	out, err := exec.Command(filepath.Join(r.dir, "slipway-linux-"+goruntime.GOARCH), "version").Output()
	if err != nil {
		t.Fatalf("slipway version of %s: %v", r.dir, err)
	}
	if f := strings.Fields(string(out)); len(f) > 1 {
		return f[1]
	}
	return strings.TrimSpace(string(out))
}

// previousDeploy is the deploy folder (base and overlays) of commit, as
// git archive writes it.
func previousDeploy(t testing.TB, commit string) string {
	t.Helper()
	dir := t.TempDir()
	tar := filepath.Join(dir, "deploy.tar")
	for _, c := range []*exec.Cmd{
		exec.Command("git", "-C", harness.Root(t), "archive", "--output", tar, commit, "deploy/base", "deploy/overlays"),
		exec.Command("tar", "-xf", tar, "-C", dir),
	} {
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, b)
		}
	}
	return filepath.Join(dir, "deploy")
}

// waitRolledOut waits (at most 4 minutes) until Deployment name's rollout
// is complete as kubectl rollout status tells it: the controller saw the
// latest spec, and replicas pods are updated, available, and the only
// ones.
func waitRolledOut(t testing.TB, e *harness.Env, name string, replicas int64) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	var last string
	for {
		d, err := e.Dyn.Resource(harness.DeploymentsGVR).Namespace("slipway-system").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(d.Object, "status", f); return v }
			last = fmt.Sprintf("generation %d observed %d, replicas %d updated %d available %d", d.GetGeneration(),
				st("observedGeneration"), st("replicas"), st("updatedReplicas"), st("availableReplicas"))
			if st("observedGeneration") >= d.GetGeneration() && st("updatedReplicas") == replicas &&
				st("replicas") == replicas && st("availableReplicas") == replicas {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s has not rolled out after 4m (%s; %v):\n%s", name, last, err, harness.PodsState(t, e.C, name))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkPlanesRun checks, from the pods the cluster runs, that both planes'
// pods that are not going away run image and are Ready.
func checkPlanesRun(t testing.TB, e *harness.Env, image string) {
	t.Helper()
	for _, app := range []string{"slipway-control", "slipway-runtime"} {
		pods, err := e.CS.CoreV1().Pods("slipway-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + app})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			n++
			for _, c := range p.Spec.Containers {
				if c.Image != image {
					t.Errorf("pod %s's container %s runs %s, want %s", p.Name, c.Name, c.Image, image)
				}
			}
		}
		if n != 2 {
			t.Errorf("%s has %d pods not going away, want 2", app, n)
		}
	}
}

// nodeProofs are the proofs a rollout on the test node runs: all but
// network.
var nodeProofs = []string{"allocate", "identity", "template-tests", "workspace-writable", "cleanup"}

// rollPool rolls pool agents from generation from to one that pins rel's
// slipway image as control plane and its slipway-runner (the template and
// protocols kept), as an operator does once the planes run rel, with
// rel's CLI: generation create --from, promote, rollout start --kubeconfig
// --prover (the runtime's Service) --wait. It returns the new
// generation's id.
func rollPool(t testing.TB, e *harness.Env, from string, rel upgradeRelease) string {
	t.Helper()
	repo := e.Git.Dir("config.git")
	work := t.TempDir()
	files := map[string]string{
		"g1.yaml":     "pools/agents/generations/" + from + ".yaml",
		"policy.yaml": "policies/verification.yaml",
		"token":       "",
	}
	for name, path := range files {
		body := harness.RuntimeToken
		if path != "" {
			body = gittest.Git(t, repo, "show", "main:"+path)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g2 := filepath.Join(work, "g2.yaml")
	id := strings.TrimSpace(e.Slipway(t, "generation", "create", "--pool", "agents", "--policy", filepath.Join(work, "policy.yaml"),
		"--from", filepath.Join(work, "g1.yaml"), "--out-file", g2,
		"--pin", "controlPlane="+rel.images["slipway"], "--pin", "runner="+rel.images["slipway-runner"]))
	e.Slipway(t, "promote", "--repo", repo, "--pool", "agents", "--generation", g2)
	e.Slipway(t, "rollout", "start", "--repo", repo, "--pool", "agents", "--to", id, "--wait", "--unsigned-evidence",
		"--kubeconfig", e.C.Kubeconfig(), "--namespace", "slipway-sandboxes",
		"--prover", e.ServiceURL(t, "slipway-runtime"), "--token-file", filepath.Join(work, "token"))
	return id
}

// servedBy says which release p is (by its binary), for the log.
func servedBy(t testing.TB, p *runmanifest.Process, prev, next upgradeRelease) string {
	if p == nil {
		return "none"
	}
	for _, r := range []struct {
		name string
		rel  upgradeRelease
	}{{"previous", prev}, {"this", next}} {
		if p.BinarySHA256 == "sha256:"+harness.ReleaseSums(t, r.rel.dir)["slipway-linux-"+goruntime.GOARCH] {
			return r.name + " release's"
		}
	}
	return "an unknown binary " + p.BinarySHA256
}

// submission is one job submitted: its idempotency key, and once accepted
// its id and when it was.
type submission struct {
	key string
	id  string
	at  time.Time
	err error
}

// submitter submits a job every period until stopped: each job echoes,
// sleeps 3 s and echoes again. A submission that fails is asked again with
// the same idempotency key (a request the server took but whose answer was
// lost is then answered with the job it made) for up to 30 s.
type submitter struct {
	mu   sync.Mutex
	subs []*submission
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func startSubmitting(ctx context.Context, c *controlapi.Client, period time.Duration) *submitter {
	s := &submitter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			sub := &submission{key: fmt.Sprintf("upgrade-%d", i)}
			s.mu.Lock()
			s.subs = append(s.subs, sub)
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				spec := controlapi.Spec{Pool: "agents", Profile: "standard", IdempotencyKey: sub.key,
					Commands: [][]string{{"sh", "-c", fmt.Sprintf("echo job %d from $(hostname); sleep 3; echo job %d done", i, i)}}}
				until := time.Now().Add(30 * time.Second)
				for {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					j, _, err := c.Submit(rctx, spec)
					cancel()
					s.mu.Lock()
					if err == nil {
						sub.id, sub.at, sub.err = j.ID, time.Now(), nil
					} else {
						sub.err = err
					}
					s.mu.Unlock()
					if err == nil || time.Now().After(until) {
						return
					}
					time.Sleep(time.Second)
				}
			}()
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the submissions and waits for those under way.
func (s *submitter) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

// succeeded is how many accepted jobs have succeeded so far.
func (s *submitter) succeeded(ctx context.Context, c *controlapi.Client) int {
	n := 0
	for _, sub := range s.snapshot() {
		if sub.id == "" {
			continue
		}
		if j, err := c.Get(ctx, sub.id); err == nil && j.State == controlapi.Succeeded {
			n++
		}
	}
	return n
}

func (s *submitter) snapshot() []submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]submission, len(s.subs))
	for i, sub := range s.subs {
		out[i] = *sub
	}
	return out
}

// results are the accepted submissions and the keys of the others with
// their last error.
func (s *submitter) results() ([]submission, []string) {
	var acc []submission
	var ref []string
	for _, sub := range s.snapshot() {
		if sub.id != "" {
			acc = append(acc, sub)
		} else {
			ref = append(ref, fmt.Sprintf("%s: %v", sub.key, sub.err))
		}
	}
	return acc, ref
}

func (s *submitter) summary() string {
	acc, ref := s.results()
	return fmt.Sprintf("%d accepted, %d not", len(acc), len(ref))
}

// awaitEnds follows the accepted jobs until each is terminal or unknown
// with an owner and a deadline (an unknown one then past its owner's
// deadline, harness.AfterOwnerDeadline), for at most wait; a job missing from the
// answer never ended that way.
func awaitEnds(t testing.TB, ctx context.Context, c *controlapi.Client, subs []submission, wait time.Duration) map[string]*controlapi.Job {
	t.Helper()
	final := map[string]*controlapi.Job{}
	deadline := time.Now().Add(wait)
	for len(final) < len(subs) && time.Now().Before(deadline) {
		for _, s := range subs {
			if final[s.id] != nil {
				continue
			}
			j, err := c.Get(ctx, s.id)
			if err != nil {
				continue
			}
			if j.State.Terminal() || (j.State == controlapi.Unknown && j.Owner != "" && j.OwnerDeadline != nil) {
				final[s.id] = j
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	var unknown []string
	for id, j := range final {
		if j.State == controlapi.Unknown {
			unknown = append(unknown, id)
		}
	}
	sort.Strings(unknown)
	for _, id := range unknown {
		final[id] = harness.AfterOwnerDeadline(t, ctx, c, final[id])
	}
	return final
}
