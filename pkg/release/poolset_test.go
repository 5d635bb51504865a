package release_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// reviewedPool is a pool.yaml as a person keeps it: comments and an order
// of its own.
const reviewedPool = `# Pool agents (owned by the platform team)
apiVersion: slipway.dev/v1alpha1
kind: Pool
metadata:
  name: agents
spec:
  warmSize: 2 # per generation
  requiredKinds: [controlPlane, runner, workspaceTemplate]
  refillPerSecond: 2
  readyTimeout: 30s
  phaseDeadlines:
    warm: 5m
  drainDeadline: 30m
  onDrainDeadline: wait
  rollbackWindow: 24h
  restoreWindow: 168h
  network:
    mode: deny
`

// poolRepo is a config repository over HTTP seeded for pool agents with
// reviewedPool.
func poolRepo(t *testing.T) (*gittest.Server, string, string) {
	t.Helper()
	s := gittest.NewServer(t)
	url := s.InitBare(t, "config.git", "main")
	if _, err := release.InitConfig(context.Background(), url, "main", "agents", map[string][]byte{pool.PoolFile("agents"): []byte(reviewedPool)}, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	return s, url, s.Dir("config.git")
}

func setPool(url string, mod func(*release.PoolSet), set ...string) (*release.PoolSetResult, error) {
	ps := release.PoolSet{Repo: url, Pool: "agents", Author: gitops.Signature{Name: "ops", Email: "ops@example.invalid"}}
	for _, s := range set {
		a, err := pool.ParseAssignment(s)
		if err != nil {
			return nil, err
		}
		ps.Set = append(ps.Set, a)
	}
	if mod != nil {
		mod(&ps)
	}
	return release.SetPool(context.Background(), ps)
}

func TestSetPool(t *testing.T) {
	_, url, dir := poolRepo(t)
	ctx := context.Background()

	res, err := setPool(url, func(p *release.PoolSet) { p.Message = "Bigger template: warming takes longer." },
		"warmSize=4", "phaseDeadlines.warm=10m", "onDrainDeadline=stop")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != gitops.Committed || len(res.Changes) != 3 || res.Changed[0] != pool.PoolFile("agents") {
		t.Fatalf("%+v", res)
	}
	msg := gittest.Git(t, dir, "log", "-1", "--format=%B", "main")
	for _, want := range []string{"agents: set warmSize, phaseDeadlines.warm, onDrainDeadline\n", "Bigger template: warming takes longer.",
		"warmSize: 2 -> 4", "phaseDeadlines.warm: 5m -> 10m", "onDrainDeadline: wait -> stop", "Slipway-Pool: agents\nSlipway-Step: pool-set"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	doc := gittest.Git(t, dir, "show", "main:"+pool.PoolFile("agents"))
	for _, want := range []string{"# Pool agents (owned by the platform team)", "warmSize: 4 # per generation\n  requiredKinds:", "warm: 10m", "onDrainDeadline: stop"} {
		if !strings.Contains(doc, want) {
			t.Errorf("pool.yaml lacks %q:\n%s", want, doc)
		}
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	head := gittest.Git(t, dir, "rev-parse", "main")

	// Show reads what was set, at the commit.
	shown, err := release.ShowPool(ctx, url, "main", "agents")
	if err != nil || shown.Revision != head || shown.Spec.WarmSize != 4 || !strings.Contains(shown.Document, "# per generation") {
		t.Fatalf("show: %+v %v", shown, err)
	}
	for _, s := range shown.Settings {
		if s.Field == "phaseDeadlines.prove" && !s.Default {
			t.Errorf("prove is not set, so its deadline is the default: %+v", s)
		}
	}

	// The same values again: Unchanged, no commit.
	res, err = setPool(url, nil, "warmSize=4", "phaseDeadlines.warm=600s")
	if err != nil || res.Status != gitops.Unchanged || len(res.Changes) != 0 {
		t.Fatalf("repeat: %+v %v", res, err)
	}

	// Refusals name the field and the value and write nothing.
	for set, want := range map[string]string{
		"warmsize=4":                   `unknown field "warmsize"`,
		"phaseDeadlines.warm=ten":      "phaseDeadlines.warm=ten: invalid pool setting: not a duration",
		"onDrainDeadline=later":        "onDrainDeadline=later: invalid pool setting: want wait, stop or checkpoint",
		"network.allow=proxy.int:3128": "pools/agents/pool.yaml:", // mode deny: the whole file is refused
	} {
		if _, err := setPool(url, nil, set); !errors.Is(err, pool.ErrSetting) && !errors.Is(err, pool.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", set, err, want)
		}
	}
	if _, err := setPool(url, func(p *release.PoolSet) { p.Pool = "nobody" }, "warmSize=1"); err == nil || !strings.Contains(err.Error(), "holds no pools/nobody/pool.yaml") {
		t.Errorf("a pool without pool.yaml: %v", err)
	}
	if got := gittest.Git(t, dir, "rev-parse", "main"); got != head {
		t.Fatal("a refused or unchanged set moved the branch")
	}

	// A review branch: main stays, the branch holds the commit on main.
	res, err = setPool(url, func(p *release.PoolSet) { p.ReviewBranch = "pool/agents-warm" }, "warmSize=6")
	if err != nil || res.Status != gitops.Committed || res.Branch != "pool/agents-warm" {
		t.Fatalf("review branch: %+v %v", res, err)
	}
	if gittest.Git(t, dir, "rev-parse", "main") != head || gittest.Git(t, dir, "rev-parse", "pool/agents-warm^") != head {
		t.Error("the review branch is not one commit on main, or main moved")
	}
}

// TestSetPoolLostRace: another writer changes another setting between our
// fetch and our push. The push loses the compare-and-swap, the edit is
// re-applied to the new head, and both changes are kept.
func TestSetPoolLostRace(t *testing.T) {
	s, url, dir := poolRepo(t)
	var raced atomic.Bool
	var otherErr error
	s.BeforeReceivePack(func() bool {
		if raced.CompareAndSwap(false, true) {
			// Through the bare repository's path, not over HTTP (so
			// not through this hook).
			_, otherErr = setPool(dir, nil, "rollbackWindow=48h")
		}
		return true
	})
	res, err := setPool(url, func(p *release.PoolSet) { p.RepoOptions = []gitops.Option{gitops.WithRetry(5, 10*time.Millisecond)} }, "warmSize=3")
	if otherErr != nil {
		t.Fatalf("the other writer: %v", otherErr)
	}
	if err != nil || res.Status != gitops.Committed || res.Attempts != 2 {
		t.Fatalf("%+v %v; want committed on the second attempt", res, err)
	}
	doc := gittest.Git(t, dir, "show", "main:"+pool.PoolFile("agents"))
	if !strings.Contains(doc, "warmSize: 3 # per generation") || !strings.Contains(doc, "rollbackWindow: 48h") {
		t.Errorf("a change was lost:\n%s", doc)
	}
	if merges := gittest.Git(t, dir, "rev-list", "--merges", "main"); merges != "" {
		t.Error("history is not linear")
	}
	steps := gittest.Git(t, dir, "log", "--format=%(trailers:key=Slipway-Step,valueonly)", "main")
	if strings.Count(steps, "pool-set") != 2 {
		t.Errorf("steps:\n%s", steps)
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
}

// TestConcurrentPoolSets: writers, each with its own store as separate
// processes have, set one phase deadline each at once over HTTP. Every
// change lands exactly once and none is lost.
func TestConcurrentPoolSets(t *testing.T) {
	_, url, dir := poolRepo(t)
	var wg sync.WaitGroup
	errs := make([]error, len(pool.Phases))
	for i, ph := range pool.Phases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = setPool(url, func(p *release.PoolSet) {
				p.RepoOptions = []gitops.Option{gitops.WithRetry(40, 10*time.Millisecond)}
			}, fmt.Sprintf("phaseDeadlines.%s=%dm", ph, 11+i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	shown, err := release.ShowPool(context.Background(), url, "main", "agents")
	if err != nil {
		t.Fatal(err)
	}
	for i, ph := range pool.Phases {
		if got := shown.Spec.PhaseDeadlines[ph].Duration; got != time.Duration(11+i)*time.Minute {
			t.Errorf("phase %s: %v", ph, got)
		}
	}
	subjects := strings.Split(gittest.Git(t, dir, "log", "--format=%s", "main"), "\n")
	for _, ph := range pool.Phases {
		if c := slices.Index(subjects, "agents: set phaseDeadlines."+ph); c < 0 {
			t.Errorf("no commit for %s in %q", ph, subjects)
		}
	}
	if n := strings.Count(gittest.Git(t, dir, "log", "--format=%(trailers:key=Slipway-Step,valueonly)", "main"), "pool-set"); n != len(pool.Phases) {
		t.Errorf("%d pool-set commits, want %d", n, len(pool.Phases))
	}
	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
}
