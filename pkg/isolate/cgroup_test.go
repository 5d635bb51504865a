package isolate_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// requireCgroups fails when the host offers no writable cgroup controller
// the test needs: this project's hosts do (v1 or v2).
func requireCgroups(t *testing.T, need ...string) *isolate.Cgroups {
	t.Helper()
	c := isolate.DetectCgroups("slipway-test")
	for _, n := range need {
		if !slices.Contains(c.Controllers(), n) {
			t.Fatalf("cgroup controller %s is not writable here (%s %v): %s", n, c.Version(), c.Controllers(), c.Reason())
		}
	}
	return c
}

func newCgroup(t *testing.T, c *isolate.Cgroups, l isolate.CgroupLimits) *isolate.Cgroup {
	t.Helper()
	g, err := c.New("t-"+strings.NewReplacer("/", "-").Replace(t.Name()), l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func TestCgroupHoldsTheWholeSandbox(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerPids)
	g := newCgroup(t, c, isolate.CgroupLimits{Pids: 64})
	s := baseSpec(t, "sleep 30 & sleep 30 & wait")
	s.Cgroup = g
	p, err := isolate.Start(context.Background(), s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(); _, _ = p.Wait() }()
	waitFor(t, "bwrap, pid 1, sh and two sleeps in the cgroup", func() bool {
		pids, _ := g.Procs()
		return len(pids) >= 5 && slices.Contains(pids, p.Pid()) && slices.Contains(pids, p.SandboxPid())
	})
	_ = p.Kill()
	_, _ = p.Wait()
	if pids, _ := g.Procs(); len(pids) != 0 {
		t.Errorf("after Wait the cgroup still holds %v", pids)
	}
}

// On cgroup v1, Start forks bwrap inside the sandbox's cgroup (moving a
// running process in costs an RCU grace period, ~10 ms a start), and the
// thread that forked it goes back: no thread of this process is left in
// the sandbox's cgroup, where Remove would find it.
func TestCgroupSandboxIsBornInside(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerPids)
	if c.Version() == isolate.CgroupV1 && os.Geteuid() == 0 && !isolate.StartsInside(c) {
		t.Fatal("root on cgroup v1: Start should fork sandboxes inside their cgroup")
	}
	g := newCgroup(t, c, isolate.CgroupLimits{Pids: 64})
	name := "t-" + strings.NewReplacer("/", "-").Replace(t.Name())
	for i := range 5 {
		s := baseSpec(t, "sleep 30")
		s.Cgroup = g
		if i%2 == 1 {
			s.Limits = isolate.Limits{NoFile: 256} // prlimit, then bwrap
		}
		p, err := isolate.Start(context.Background(), s, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := isolate.BornInCgroup(p), isolate.StartsInside(c); got != want {
			t.Errorf("start %d: born in the cgroup %v, want %v", i, got, want)
		}
		pids, err := g.Procs()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pids, p.Pid()) || !slices.Contains(pids, p.SandboxPid()) {
			t.Errorf("start %d: the cgroup holds %v, not bwrap %d and pid 1 %d", i, pids, p.Pid(), p.SandboxPid())
		}
		if slices.Contains(pids, os.Getpid()) {
			t.Errorf("start %d: a thread of this process is in the sandbox's cgroup", i)
		}
		tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
		for _, f := range tasks {
			if data, _ := os.ReadFile(f); strings.Contains(string(data), "/"+name+"\n") {
				t.Errorf("start %d: %s: %s", i, f, data)
			}
		}
		_ = p.Kill()
		_, _ = p.Wait()
	}
}

func TestCgroupForkBombStopsAtPids(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerPids)
	g := newCgroup(t, c, isolate.CgroupLimits{Pids: 16})
	s := baseSpec(t, `i=0; while [ $i -lt 64 ]; do sleep 5 & i=$((i+1)); done; echo started; kill $(jobs -p) 2>/dev/null; exit 0`)
	s.Cgroup = g
	s.Timeout = time.Minute
	res, err := isolate.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := g.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev.PidsRefused == 0 {
		t.Fatalf("no fork was refused at pids.max 16: %s", describe(res))
	}
	t.Logf("%d forks refused; %s", ev.PidsRefused, describe(res))
}

func TestCgroupMemoryBalloonIsOOMKilled(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerMemory)
	g := newCgroup(t, c, isolate.CgroupLimits{MemoryBytes: 32 << 20})
	// The shell keeps the command's 100 MB output in memory.
	s := baseSpec(t, `x=$(yes | head -c 100000000); echo survived ${#x}`)
	s.Cgroup = g
	s.Timeout = time.Minute
	res, err := isolate.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := g.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev.OOMKills == 0 || strings.Contains(string(res.Output), "survived") {
		t.Fatalf("a 100 MB balloon under a 32 MiB limit: %d OOM kills; %s", ev.OOMKills, describe(res))
	}
}

func TestCgroupNewRefusesAMissingController(t *testing.T) {
	c := isolate.DetectCgroups("bad/name")
	if c.Version() != isolate.CgroupNone || c.Reason() == "" {
		t.Fatalf("version %s reason %q", c.Version(), c.Reason())
	}
	if _, err := c.New("x", isolate.CgroupLimits{MemoryBytes: 1 << 30}); err == nil || !strings.Contains(err.Error(), "no writable memory controller") {
		t.Fatalf("err = %v", err)
	}
}

// TestCgroupSandboxesWeighTheMachine: the sandboxes' parent cgroup has the
// CPU weight of the whole machine (1024 shares, or a cpu.weight of 100, per
// CPU), so together they are not weighed as one thread of the runtime.
func TestCgroupSandboxesWeighTheMachine(t *testing.T) {
	c := requireCgroups(t, isolate.ControllerCPU)
	file, want := "cpu.shares", 1024*runtime.NumCPU()
	if c.Version() == isolate.CgroupV2 {
		file, want = "cpu.weight", min(100*runtime.NumCPU(), 10000)
	}
	// The directory outlives a run: set it back to the default, detect again.
	def := map[string]string{"cpu.shares": "1024", "cpu.weight": "100"}[file]
	if err := os.WriteFile(filepath.Join(isolate.CPUDir(c), file), []byte(def), 0); err != nil {
		t.Fatal(err)
	}
	c = isolate.DetectCgroups("slipway-test")
	b, err := os.ReadFile(filepath.Join(isolate.CPUDir(c), file))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(want) {
		t.Fatalf("%s of %s: %s, want %d", file, isolate.CPUDir(c), got, want)
	}
}
