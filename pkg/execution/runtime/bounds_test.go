package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A pool's limits bind its sandboxes: the manifest says how, /v1/info
// says what the host enforces, and a memory balloon ends with outcome
// oom_killed in the exec result and the manifest while the sandbox serves
// on.
func TestPoolLimitsBoundClaims(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	d.Pools["agents"].Pool.Spec.Limits = pool.Limits{Memory: "64Mi", Pids: 64, OpenFiles: 512, Workspace: "16Mi"}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	if rep := warm.Reconcile(ctx, d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	e := be.Enforcement()
	if m.Limits == nil || m.Limits.Cgroup != e.Cgroup || m.Limits.Cgroup == "none" || len(m.Limits.Enforced) != 4 ||
		!strings.Contains(m.Limits.Enforced["memory"], "cgroup") || !strings.Contains(m.Limits.Enforced["workspace"], "tmpfs") {
		t.Fatalf("manifest limits %+v", m.Limits)
	}
	var out bytes.Buffer
	sh := func(script string) *runner.ExitStatus {
		t.Helper()
		out.Reset()
		st, err := rt.Exec(ctx, gr.RunID, gr.Token, runner.ExecRequest{Argv: []string{"sh", "-c", script}, TimeoutMs: 60000}, &out, &out)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := sh("ulimit -n; df -k /workspace | tail -1"); st.Outcome != "" || !strings.HasPrefix(out.String(), "512\n") || !strings.Contains(out.String(), " 16384 ") {
		t.Fatalf("inside: %q, status %+v", out.String(), st)
	}
	if st := sh(`x=$(yes | head -c 300000000); echo survived ${#x}`); st.Outcome != runmanifest.OutcomeOOMKilled {
		t.Fatalf("balloon: outcome %q, status %+v, output %.200q", st.Outcome, st, out.String())
	}
	if st := sh("echo alive"); st.ExitCode != 0 || out.String() != "alive\n" || st.Outcome != "" {
		t.Fatalf("after the balloon: %+v %q", st, out.String())
	}
	if m, err = store.Get(ctx, gr.RunID); err != nil || m.Outcome != runmanifest.OutcomeOOMKilled {
		t.Fatalf("manifest outcome %q, %v", m.Outcome, err)
	}

	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	req, _ := http.NewRequest("GET", hs.URL+"/v1/info", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info runtimeapi.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Limits.Cgroup != e.Cgroup || !slices.Equal(info.Limits.Enforced, e.Enforced) || info.Limits.How["pids"] == "" {
		t.Fatalf("info limits %+v, backend %+v", info.Limits, e)
	}
}

// A limit the host cannot enforce refuses the pool, naming the file and
// the limit, unless the pool accepts running without it.
func TestUnenforceableLimitRefusesThePool(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be, err := local.New(t.TempDir(), local.WithoutCgroups())
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
	d := w.desired(t, "rev-1", 1, w.generation(t, nil))
	spec := &d.Pools["agents"].Pool.Spec
	spec.Limits = pool.Limits{Memory: "64Mi", OpenFiles: 512}
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	rep := warm.Reconcile(ctx, d)
	if len(rep.Created) != 0 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "pools/agents/pool.yaml: spec.limits sets memory, which this host cannot enforce (cgroup none") {
		t.Fatalf("reconcile %+v", rep)
	}
	if _, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"}); !errors.Is(err, runtime.ErrUnenforceable) {
		t.Fatalf("claim: %v", err)
	}
	spec.AcceptUnenforced = []string{"memory"}
	gr, err := rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Get(ctx, gr.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits == nil || m.Limits.Cgroup != "none" || !strings.HasPrefix(m.Limits.Enforced["memory"], "not enforced") || !strings.Contains(m.Limits.Enforced["openFiles"], "RLIMIT_NOFILE") {
		t.Fatalf("manifest limits %+v", m.Limits)
	}
}
