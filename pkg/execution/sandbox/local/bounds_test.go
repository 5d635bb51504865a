package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// bounded makes a backend that must enforce every limit and a sandbox
// with limits l.
func bounded(t *testing.T, l sandbox.Limits) (*local.Backend, *sandbox.Sandbox) {
	t.Helper()
	b := newBackend(t, t.TempDir())
	e := b.Enforcement()
	for _, n := range []string{sandbox.LimitCPU, sandbox.LimitMemory, sandbox.LimitPids, sandbox.LimitWorkspace} {
		if !containsStr(e.Enforced, n) {
			t.Fatalf("this host must let the backend enforce %s: %+v", n, e)
		}
	}
	spec := specFor(t, templateImage(t, "", "machine-id"))
	spec.Limits = l
	return b, create(t, b, spec)
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// execOutcome runs script with a timeout and returns the limit outcome
// (sandbox.Outcome), the exit status and the output.
func execOutcome(t *testing.T, b *local.Backend, s *sandbox.Sandbox, script string, timeout time.Duration) (string, *runner.ExitStatus, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	before, err := b.LimitEvents(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", script}, TimeoutMs: timeout.Milliseconds()}, &out, &out)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	after, err := b.LimitEvents(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Outcome(before, after, st), st, out.String()
}

// stillServes checks the sandbox's runner still runs commands.
func stillServes(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	if out, stderr, code := sh(t, s, "echo alive"); out != "alive\n" || code != 0 {
		t.Fatalf("the sandbox no longer serves: %q %q %d", out, stderr, code)
	}
}

func TestBoundsForkBomb(t *testing.T) {
	setup(t)
	b, s := bounded(t, sandbox.Limits{Pids: 64})
	neighbour := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	outcome, st, out := execOutcome(t, b, s, `bomb() { bomb | bomb & }; bomb; sleep 3`, 5*time.Second)
	if outcome != sandbox.OutcomePidsExhausted {
		t.Fatalf("outcome %q, want %q; status %+v; output %.300q", outcome, sandbox.OutcomePidsExhausted, st, out)
	}
	stillServes(t, neighbour)
	// What the command left in the background may still hold the pids
	// (a command's background processes are the sandbox's, runner/doc.go;
	// a bomb on a busy host can outlive it by seconds): deleting the
	// sandbox ends all of it, its cgroups included (a cgroup with a
	// process left cannot be removed), and the neighbour serves on.
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Fatalf("delete the bombed sandbox: %v", err)
	}
	if left := cgroupDirs(t, s.ID); len(left) != 0 {
		t.Errorf("cgroups left: %v", left)
	}
	stillServes(t, neighbour)
}

func TestBoundsMemoryBalloon(t *testing.T) {
	setup(t)
	b, s := bounded(t, sandbox.Limits{MemoryBytes: 64 << 20})
	outcome, st, out := execOutcome(t, b, s, `x=$(yes | head -c 300000000); echo survived ${#x}`, time.Minute)
	if outcome != sandbox.OutcomeOOMKilled || strings.Contains(out, "survived") {
		t.Fatalf("outcome %q, want %q; status %+v; output %.300q", outcome, sandbox.OutcomeOOMKilled, st, out)
	}
	stillServes(t, s)
}

func TestBoundsWorkspaceFull(t *testing.T) {
	setup(t)
	b, s := bounded(t, sandbox.Limits{WorkspaceBytes: 8 << 20})
	outcome, st, out := execOutcome(t, b, s, `dd if=/dev/zero of=/workspace/fill bs=1M count=100`, time.Minute)
	if outcome != sandbox.OutcomeDiskFull {
		t.Fatalf("outcome %q, want %q; status %+v; output %.300q", outcome, sandbox.OutcomeDiskFull, st, out)
	}
	if out, _, _ := sh(t, s, "ls -l /workspace/fill"); !strings.Contains(out, " 8388608 ") {
		t.Errorf("the workspace holds more or less than its 8 MiB: %q", out)
	}
	stillServes(t, s)
	if out, _, code := sh(t, s, "rm /workspace/fill && echo x > /workspace/small && cat /workspace/small"); code != 0 || out != "x\n" {
		t.Errorf("after freeing space: %q %d", out, code)
	}
}

// A CPU spinner limited to half a core beside an unlimited neighbour: the
// neighbour's command must not take more than twice its time alone. With
// four spinners and no limit, on two cores, it would.
func TestBoundsCPUSpinnerBesideNeighbour(t *testing.T) {
	setup(t)
	b, spinner := bounded(t, sandbox.Limits{CPUMillis: 500})
	neighbour := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	const work = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`
	timeIt := func() time.Duration {
		start := time.Now()
		if _, stderr, code := sh(t, neighbour, work); code != 0 {
			t.Fatalf("neighbour: %q", stderr)
		}
		return time.Since(start)
	}
	timeIt() // warm up
	var ratio float64
	for attempt := 0; attempt < 3; attempt++ {
		base := timeIt()
		before, err := b.LimitEvents(context.Background(), spinner.ID)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := spinner.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "for n in 1 2 3 4; do (while :; do :; done) & done; wait"}, TimeoutMs: 60000}, nil, nil)
			done <- err
		}()
		// The spinners run, and the quota holds them back: the cgroup's
		// throttle counter grows (on a busy machine this can take a while).
		deadline := time.Now().Add(20 * time.Second)
		for {
			ev, err := b.LimitEvents(context.Background(), spinner.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ev.CPUThrottled > before.CPUThrottled {
				break
			}
			select {
			case err := <-done:
				cancel()
				t.Fatalf("the spinner's command ended before its quota held it back: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("the spinner's quota never held it back in 20s: %+v then %+v", before, ev)
			}
			time.Sleep(50 * time.Millisecond)
		}
		loaded := timeIt()
		cancel()
		<-done
		ratio = float64(loaded) / float64(base)
		t.Logf("attempt %d: alone %s, beside the spinner %s (%.2fx)", attempt, base, loaded, ratio)
		if ratio <= 2 {
			return
		}
	}
	t.Fatalf("the neighbour ran %.2fx slower beside a spinner limited to half a core", ratio)
}

func TestBoundsRefusedWhenUnenforceable(t *testing.T) {
	setup(t)
	b := newBackend(t, t.TempDir(), local.WithoutCgroups())
	if e := b.Enforcement(); e.Cgroup != "none" || containsStr(e.Enforced, sandbox.LimitMemory) || !strings.Contains(e.Unavailable, "WithoutCgroups") {
		t.Fatalf("enforcement %+v", e)
	}
	spec := specFor(t, templateImage(t, "", "machine-id"))
	spec.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 64}
	_, err := b.Create(context.Background(), spec)
	if !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "memory cannot be enforced") || !strings.Contains(err.Error(), "pids cannot be enforced") {
		t.Fatalf("err = %v", err)
	}
}

// A bounded create waits for the disk no more often than an unbounded
// one (B11's cold start): the record says its cgroup and workspace in its
// first write, and the counters and the workspace are read from it.
func TestBoundsCreateWritesTheRecordOnce(t *testing.T) {
	setup(t)
	b := newBackend(t, t.TempDir())
	spec := specFor(t, templateImage(t, "", "machine-id"))
	writes := func(spec sandbox.Spec) (int64, *sandbox.Sandbox) {
		n := local.RecordWrites(b)
		s := create(t, b, spec)
		return local.RecordWrites(b) - n, s
	}
	plain, _ := writes(spec)
	spec.Limits = sandbox.Limits{MemoryBytes: 64 << 20, Pids: 64, CPUMillis: 1000, WorkspaceBytes: 4 << 20}
	n, s := writes(spec)
	if n != plain {
		t.Errorf("a bounded create wrote sandbox.json %d times, an unbounded one %d", n, plain)
	}
	if cg := cgroupDirs(t, s.ID); len(cg) == 0 || mountedUnder(t, s.ID) {
		t.Fatalf("cgroups %v, workspace mounted on the host %v", cg, mountedUnder(t, s.ID))
	}
	if m := workspaceMount(t, s); !strings.Contains(m, " - tmpfs ") || !strings.Contains(m, "size=4096k") {
		t.Fatalf("the workspace inside is %q, want a tmpfs of 4 MiB", m)
	}
	_, _, _ = sh(t, s, "dd if=/dev/zero of=/workspace/fill bs=64k count=100 2>/dev/null")
	ev, err := b.LimitEvents(context.Background(), s.ID)
	if err != nil || !ev.WorkspaceFull {
		t.Errorf("LimitEvents = %+v, %v; want a full workspace", ev, err)
	}
}

// Delete leaves no cgroup and no workspace mount behind.
func TestBoundsDeleteCleansUp(t *testing.T) {
	setup(t)
	b, s := bounded(t, sandbox.Limits{MemoryBytes: 64 << 20, Pids: 64, CPUMillis: 1000, WorkspaceBytes: 4 << 20})
	cgroups := cgroupDirs(t, s.ID)
	if len(cgroups) == 0 {
		t.Fatal("no cgroup directory names the sandbox")
	}
	if mountedUnder(t, s.ID) {
		t.Fatal("the workspace tmpfs is on the host's mount table")
	}
	if m := workspaceMount(t, s); !strings.Contains(m, " - tmpfs ") {
		t.Fatalf("the workspace inside is %q, want a tmpfs", m)
	}
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	if left := cgroupDirs(t, s.ID); len(left) != 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if mountedUnder(t, s.ID) {
		t.Error("the workspace tmpfs is still mounted")
	}
}

func cgroupDirs(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == id {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// mountedUnder says whether the host's mount table holds a workspace
// tmpfs of sandbox id: it never should, the tmpfs is the sandbox's own.
func mountedUnder(t *testing.T, id string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), "/"+id+"/workspace ")
}

// workspaceMount is the mount options of the sandbox's workspace as the
// sandbox sees it ("" when it is no mount of its own).
func workspaceMount(t *testing.T, s *sandbox.Sandbox) string {
	t.Helper()
	out, _, _ := sh(t, s, `grep ' /workspace ' /proc/self/mountinfo`)
	return strings.TrimSpace(out)
}
