package runtime_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/testharness/need"
)

// hostCgroupFile reads file of sandbox id's cgroup in the cgroup v1
// hierarchy of controller, as the host has it (not through Slipway): the
// local backend makes it under this process's own cgroup, in slipway/<id>.
func hostCgroupFile(t *testing.T, controller, id, file string) string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), controller) {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, parts[2], "slipway", id, file))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no cgroup v1 %s hierarchy in /proc/self/cgroup", controller)
	return ""
}

// A pool's limits changed with `pool set` while warm members exist: no
// member made for the old settings is handed out, the claim gets a
// sandbox with the new limits (read from its cgroup), and Reconcile
// replaces the old members as it replaces an old generation's (finding 1
// of issue 37: the check compared the network settings only).
func TestPoolSetReplacesWarmMembersOfOldSettings(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	if be.Enforcement().Cgroup != "v1" {
		need.Missing(t, "this test reads cgroup v1 files; the backend has cgroup %q", be.Enforcement().Cgroup)
	}
	store := newStore(t)
	d := w.desired(t, "rev-1", 2, w.generation(t, nil))
	set := func(assignments ...string) {
		t.Helper()
		b, err := pool.Marshal(d.Pools["agents"].Pool)
		if err != nil {
			t.Fatal(err)
		}
		var as []pool.Assignment
		for _, s := range assignments {
			a, err := pool.ParseAssignment(s)
			if err != nil {
				t.Fatal(err)
			}
			as = append(as, a)
		}
		out, _, err := pool.Set(b, "agents", as)
		if err != nil {
			t.Fatal(err)
		}
		p, err := pool.ParsePool(out, "agents")
		if err != nil {
			t.Fatal(err)
		}
		d.Pools["agents"].Pool = p
	}
	set("limits.memory=64Mi", "limits.pids=64")
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	rep := warm.Reconcile(ctx, d)
	if len(rep.Errors) > 0 || len(rep.Created) != 2 {
		t.Fatalf("reconcile %+v", rep)
	}
	old := rep.Created
	for _, id := range old {
		if got := hostCgroupFile(t, "memory", id, "memory.limit_in_bytes"); got != "67108864" {
			t.Fatalf("warm member %s: memory.limit_in_bytes %s", id, got)
		}
	}

	set("limits.memory=96Mi", "limits.pids=48", "limits.cpu=500m")
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(old, gr.SandboxID) {
		t.Fatalf("claim was handed %s, a warm member made for the old limits", gr.SandboxID)
	}
	if got := hostCgroupFile(t, "memory", gr.SandboxID, "memory.limit_in_bytes"); got != "100663296" {
		t.Fatalf("claimed sandbox: memory.limit_in_bytes %s, want 96Mi", got)
	}
	if got := hostCgroupFile(t, "pids", gr.SandboxID, "pids.max"); got != "48" {
		t.Fatalf("claimed sandbox: pids.max %s", got)
	}
	if got := hostCgroupFile(t, "cpu", gr.SandboxID, "cpu.cfs_quota_us"); got != "50000" {
		t.Fatalf("claimed sandbox: cpu.cfs_quota_us %s", got)
	}

	rep = warm.Reconcile(ctx, d)
	if len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	all, err := be.List(ctx, sandbox.Filter{Owner: sandbox.OwnerWarm})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("%d warm members after the change, want 2", len(all))
	}
	for _, s := range all {
		if slices.Contains(old, s.ID) {
			t.Fatalf("warm member %s of the old limits was kept (deleted %v)", s.ID, rep.Deleted)
		}
		if got := hostCgroupFile(t, "memory", s.ID, "memory.limit_in_bytes"); got != "100663296" {
			t.Fatalf("new warm member %s: memory.limit_in_bytes %s", s.ID, got)
		}
	}
}
