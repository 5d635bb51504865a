package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/generation"
	"github.com/slipway-dev/slipway/pkg/pool"
	"github.com/slipway-dev/slipway/pkg/registrytest"
	"github.com/slipway-dev/slipway/pkg/runtime"
	"github.com/slipway-dev/slipway/pkg/sandbox"
	"github.com/slipway-dev/slipway/pkg/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/template"
)

// warmWorld pushes a real runner image and a busybox template to a
// registry, and makes generations of them.
type warmWorld struct {
	host     string
	runner   string // runner image ref by digest
	template string // template image ref by digest
}

func newWarmWorld(t testing.TB) *warmWorld {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "slipway-runner")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../cmd/slipway-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build runner: %v\n%s", err, out)
	}
	base := filepath.Join(dir, "base")
	if out, err := exec.Command("bash", "../../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	ctx := context.Background()
	w := &warmWorld{host: registrytest.NewInProcess(t)}
	rimg, closeR, err := sandbox.RunnerImage(ctx, bin, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, runner.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer closeR()
	w.runner = registrytest.Push(t, w.host+"/platform/runner:v1", rimg).String()
	timg, closeT, err := template.ImageFromDir(ctx, base, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin:/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeT()
	cfg, _ := timg.ConfigFile()
	c := cfg.Config
	c.WorkingDir = "/workspace"
	if timg, err = mutate.Config(timg, c); err != nil {
		t.Fatal(err)
	}
	w.template = registrytest.Push(t, w.host+"/templates/busybox:v1", timg).String()
	return w
}

// desired is a desired state with pool agents: generations gs, the first
// active, the others warming (as a rollout in progress has them).
func (w *warmWorld) desired(t testing.TB, rev string, warmSize int, gs ...*generation.Generation) *runtime.Desired {
	t.Helper()
	p := pool.Default("agents")
	p.Spec.WarmSize = warmSize
	p.Spec.RefillPerSecond = 1000
	st := pool.NewState("agents")
	pd := &runtime.PoolDesired{Pool: p, State: st, Generations: map[string]*generation.Generation{}, Refused: map[string]string{}}
	for i, g := range gs {
		state := pool.Warming
		if i == 0 {
			state = pool.Active
		}
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: state, WarmSize: warmSize})
		pd.Generations[g.ID] = g
	}
	return &runtime.Desired{Revision: rev, Pools: map[string]*runtime.PoolDesired{"agents": pd}}
}

func (w *warmWorld) generation(t testing.TB, from *generation.Generation) *generation.Generation {
	t.Helper()
	img, _ := random.Image(32, 1)
	cp := registrytest.Push(t, w.host+"/platform/cp:"+fmt.Sprint(time.Now().UnixNano()), img)
	var compat *generation.Compatibility
	if from == nil {
		compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	}
	g, err := generation.New("agents", from, map[generation.Kind]generation.Pin{
		generation.ControlPlane: {Image: cp.String()}, generation.Runner: {Image: w.runner}, generation.WorkspaceTemplate: {Image: w.template},
	}, compat)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newLocalBackend is a bubblewrap backend whose sandboxes are all deleted
// when the test ends.
func newLocalBackend(t testing.TB) *local.Backend {
	t.Helper()
	be, err := local.New(t.TempDir())
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
