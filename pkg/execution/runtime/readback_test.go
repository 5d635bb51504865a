package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/testharness/gittest"
	"github.com/slipway-dev/slipway/testharness/need"
)

// runtimeInfo is GET /v1/info of a runtime over be, through the API.
func runtimeInfo(t *testing.T, rt *runtime.Runtime, be sandbox.Backend) *runtimeapi.Info {
	t.Helper()
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := runtimeapi.NewClient(hs.URL, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// execIn runs a shell script in run runID's sandbox.
func execIn(t *testing.T, rt *runtime.Runtime, gr *runtimeapi.Grant, script string) (string, *runner.ExitStatus) {
	t.Helper()
	var out bytes.Buffer
	st, err := rt.Exec(context.Background(), gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}, TimeoutMs: 60000}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), st
}

// A template with a user of its own runs as that uid on the host, and
// the runtime (root without CAP_SYS_RESOURCE here) may not set the limits
// of another uid's process: spec.limits.openFiles made every such sandbox
// fail (issue 37, finding 3). The runner lowers its own limit now: the
// command sees it, and the manifest records it as read back from the
// runner's /proc/<pid>/limits.
func TestOpenFilesForATemplateUser(t *testing.T) {
	need.Root(t, "a sandbox runs as its template's user (uid 1000) only when the runtime is root")
	w := newWarmWorld(t)
	ctx := context.Background()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // uid 1000 must reach the sandboxes' files
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	be, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		all, _ := be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			_ = be.Delete(ctx, s.ID)
		}
		_ = be.Close()
	})
	store := newStore(t)
	g := w.Generation(t, "agents", nil, w.TemplateAsUser(t, "1000:1000"))
	d := w.desired(t, "rev-1", 1, g)
	d.Pools["agents"].Pool.Spec.Limits = pool.Limits{Memory: "64Mi", OpenFiles: 300}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if out, st := execIn(t, rt, gr, "id -u; ulimit -Sn; ulimit -Hn"); st.ExitCode != 0 || out != "1000\n300\n300\n" {
		t.Fatalf("inside: %q %+v", out, st)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits == nil || m.Limits.Applied["openFiles"] != 300 || !strings.HasPrefix(m.Limits.Enforced["openFiles"], "enforced: 300, read back from RLIMIT_NOFILE of the runner") {
		t.Fatalf("manifest limits %+v", m.Limits)
	}
}

// The manifest records what the kernel holds for the sandbox handed out,
// not the pool's settings: a warm member whose pids limit was lifted on
// the host after it was made (the kernel holds none) is recorded as not
// enforced, while its memory limit reads back as set.
func TestManifestLimitsAreReadBack(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	if be.Enforcement().Cgroup != "v1" {
		need.Missing(t, "this test writes cgroup v1 files; the backend has cgroup %q", be.Enforcement().Cgroup)
	}
	store := newStore(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.Limits = pool.Limits{CPU: "500m", Memory: "64Mi", Pids: 64, Workspace: "16Mi"}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	rep := warm.Reconcile(ctx, d)
	if len(rep.Errors) > 0 || len(rep.Created) != 1 {
		t.Fatalf("reconcile %+v", rep)
	}
	id := rep.Created[0]
	pidsMax := filepath.Join(filepath.Dir(hostCgroupPath(t, "pids", id)), id, "pids.max")
	if err := os.WriteFile(pidsMax, []byte("max"), 0); err != nil {
		t.Fatal(err)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil || gr.SandboxID != id {
		t.Fatalf("claim %+v %v", gr, err)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Limits
	if l == nil || !strings.HasPrefix(l.Enforced["pids"], "not enforced: 64 asked, and the kernel holds no such limit") {
		t.Fatalf("pids: manifest limits %+v", l)
	}
	for name, want := range map[string]uint64{"memory": 64 << 20, "cpu": 500, "workspace": 16 << 20, "tmp": 8 << 20} {
		if l.Applied[name] != want {
			t.Errorf("applied %s = %d, want %d (%+v)", name, l.Applied[name], want, l)
		}
	}
	if !strings.HasPrefix(l.Enforced["memory"], "enforced: 67108864, read back from cgroup v1 memory.limit_in_bytes") ||
		!strings.HasPrefix(l.Enforced["cpu"], "enforced: 500, read back from cgroup v1 cpu.cfs_quota_us") ||
		!strings.HasPrefix(l.Enforced["workspace"], "enforced: 16777216, read back from statfs") {
		t.Fatalf("manifest limits %+v", l)
	}
}

// hostCgroupPath is the host's directory of sandbox id's cgroup in the
// v1 hierarchy of controller (read from this process's own cgroup).
func hostCgroupPath(t *testing.T, controller, id string) string {
	t.Helper()
	hostCgroupFile(t, controller, id, "cgroup.procs") // fails the test when absent
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ","+controller+",") {
			return filepath.Join("/sys/fs/cgroup", controller, parts[2], "slipway", id)
		}
	}
	t.Fatal("no cgroup")
	return ""
}

// /v1/info lists openFiles with the most this host can apply (the
// runtime's hard limit: raising it needs CAP_SYS_RESOURCE, which root
// lacks here), and a pool asking for more is refused, naming the pool,
// the limit and why, at the runtime (Reconcile, Claim) and at `pool set`
// where the runtime is known.
func TestOpenFilesAboveWhatTheHostCanApply(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	hard, err := isolate.NoFileHardLimit()
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.Limits = pool.Limits{OpenFiles: int64(hard) + 1}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	info := runtimeInfo(t, rt, be)
	if info.Limits.Max["openFiles"] != hard || !strings.Contains(info.Limits.How["openFiles"], "proved at start") {
		t.Fatalf("info limits %+v (hard limit %d)", info.Limits, hard)
	}
	want := fmt.Sprintf("pool agents (pools/agents/pool.yaml): spec.limits sets openFiles %d is above the %d this host can apply", hard+1, hard)
	rep := warm.Reconcile(ctx, d)
	if len(rep.Created) != 0 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], want) {
		t.Fatalf("reconcile %+v, want %q", rep, want)
	}
	if _, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"}); !errors.Is(err, runtime.ErrUnenforceable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("claim: %v", err)
	}

	// pool set, told what this runtime can apply.
	s := gittest.NewServer(t)
	url := s.InitBare(t, "config.git", "main")
	b, err := pool.Marshal(pool.Default("agents"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, url, "main", "agents", map[string][]byte{pool.PoolFile("agents"): b}, gitops.Signature{}); err != nil {
		t.Fatal(err)
	}
	set := func(rtInfo *runtimeapi.LimitsInfo, assignment string) error {
		a, err := pool.ParseAssignment(assignment)
		if err != nil {
			t.Fatal(err)
		}
		_, err = release.SetPool(ctx, release.PoolSet{Repo: url, Pool: "agents", Set: []pool.Assignment{a}, Runtime: rtInfo,
			Author: gitops.Signature{Name: "ops", Email: "ops@example.invalid"}})
		return err
	}
	err = set(&info.Limits, "limits.openFiles="+strconv.FormatUint(hard+1, 10))
	if !errors.Is(err, release.ErrLimitUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("pool agents: spec.limits.openFiles: %d is above the %d the runtime can apply", hard+1, hard)) {
		t.Fatalf("pool set above the hard limit: %v", err)
	}
	if err := set(&info.Limits, "limits.openFiles=4096"); err != nil {
		t.Fatalf("pool set within it: %v", err)
	}

	// A runtime without cgroups cannot apply a memory limit: pool set says
	// so, with the runtime's reason, unless the pool accepts that.
	nocg, err := local.New(t.TempDir(), local.WithoutCgroups())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nocg.Close() })
	info2 := runtimeInfo(t, rt, nocg)
	err = set(&info2.Limits, "limits.memory=64Mi")
	if !errors.Is(err, release.ErrLimitUnavailable) || !strings.Contains(err.Error(), "pool agents: spec.limits.memory: the runtime cannot apply it (cgroup none; cgroups turned off (WithoutCgroups)") {
		t.Fatalf("pool set of memory without cgroups: %v", err)
	}
	if err := set(&info2.Limits, "acceptUnenforced=memory"); err != nil {
		t.Fatal(err)
	}
	if err := set(&info2.Limits, "limits.memory=64Mi"); err != nil {
		t.Fatalf("accepted: %v", err)
	}
}
