package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// A claimed sandbox of a pool with a 64Mi memory limit and a 16Mi
// workspace, and its runtime.
func smallSandbox(t *testing.T) (*runtime.Runtime, *runtimeapi.Grant, func() *runmanifest.Manifest) {
	t.Helper()
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.Limits = pool.Limits{Memory: "64Mi", Pids: 128, Workspace: "16Mi"}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	return rt, gr, func() *runmanifest.Manifest {
		t.Helper()
		m, err := store.Get(ctx, gr.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// /tmp and /dev/shm are sized from the sandbox's memory limit (an eighth
// each), not half the host's memory: writing past that fails with ENOSPC
// and the sandbox serves on (issue 37, finding 4: a sandbox with a 16 MiB
// workspace wrote 24 MiB to /tmp).
func TestTmpIsSizedFromTheMemoryLimit(t *testing.T) {
	rt, gr, _ := smallSandbox(t)
	out, st := execIn(t, rt, gr, "df -k /tmp /dev/shm | tail -2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if st.ExitCode != 0 || len(lines) != 2 || strings.Fields(lines[0])[1] != "8192" || strings.Fields(lines[1])[1] != "8192" {
		t.Fatalf("df: %q %+v", out, st)
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		out, st = execIn(t, rt, gr, "dd if=/dev/zero of="+dir+"/balloon bs=1048576 count=24 2>&1; echo rc=$?; rm -f "+dir+"/balloon")
		if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "rc=1") || st.Outcome == runmanifest.OutcomeOOMKilled {
			t.Fatalf("24 MiB into %s: %q %+v", dir, out, st)
		}
	}
	if out, st := execIn(t, rt, gr, "echo alive"); out != "alive\n" || st.ExitCode != 0 {
		t.Fatalf("after: %q %+v", out, st)
	}
}

// The runner survives its workload: with the workspace, /tmp and /dev/shm
// full (all of it memory the OOM killer cannot free), many processes each
// smaller than the runner fill the rest. Every command starts with
// oom_score_adj 1000, so the OOM killer takes them, never the runner: the
// exec ends with oom_killed, the run records it, and the sandbox serves on
// (issue 37, finding 2: the runner was killed and the run lost to "missed 3
// heartbeats").
func TestBalloonKillsTheWorkloadNotTheRunner(t *testing.T) {
	rt, gr, manifest := smallSandbox(t)
	if out, _ := execIn(t, rt, gr, "cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"); out != "1000\n1000\n" {
		t.Fatalf("oom_score_adj of a command and its child: %q", out)
	}
	fill := "head -c 16777216 /dev/zero > /workspace/fill; head -c 8388608 /dev/zero > /tmp/fill; head -c 8388608 /dev/zero > /dev/shm/fill; "
	balloons := `i=0; while [ $i -lt 24 ]; do (x=$(head -c 3000000 /dev/zero | tr '\0' a); sleep 5) & i=$((i+1)); done; wait; echo done`
	out, st := execIn(t, rt, gr, fill+balloons)
	if st.Outcome != runmanifest.OutcomeOOMKilled {
		t.Fatalf("balloon: outcome %q, status %+v, output %.300q", st.Outcome, st, out)
	}
	if out, st := execIn(t, rt, gr, "echo alive; du -sk /tmp/fill"); !strings.HasPrefix(out, "alive\n") || st.ExitCode != 0 {
		t.Fatalf("after the balloon: %q %+v", out, st)
	}
	if m := manifest(); m.Outcome != runmanifest.OutcomeOOMKilled || m.AllocationAttempt != 1 {
		t.Fatalf("manifest outcome %q, allocation attempt %d", m.Outcome, m.AllocationAttempt)
	}
}
