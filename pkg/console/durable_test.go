package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// A run on a runtime that keeps no checkpoints: its page says so and
// offers no suspend or resume; a suspend without a reason is refused
// before anything else, one with a reason says the runtime keeps no
// checkpoints; neither does anything. (TestConsoleBrowser suspends and
// resumes a run on a runtime that keeps them.)
func TestRunDurableWithoutCheckpoints(t *testing.T) {
	ctx := context.Background()
	rs, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	be, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	d := &runtime.Desired{Revision: "r1", Pools: map[string]*runtime.PoolDesired{}}
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir())), rs, time.Minute)
	t.Cleanup(func() { rt.Close() })
	srv, err := runtime.NewServer(rt, nil, be, runtimeToken)
	if err != nil {
		t.Fatal(err)
	}
	rhs := httptest.NewServer(srv)
	t.Cleanup(rhs.Close)
	if err := rs.Create(ctx, &runmanifest.Manifest{RunID: "r-durable-1", Pool: "agents", AllocationAttempt: 1, SandboxID: "sb-1",
		Status: runmanifest.StatusRunning}); err != nil {
		t.Fatal(err)
	}

	cp, ops := startControl(t)
	c, err := console.New(cp, console.WithRuntime("a", rhs.URL, runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)

	code, body := get(t, hs.URL+"/runs/r-durable-1", ops)
	if code != http.StatusOK || !strings.Contains(body, `<p id="durable-none">No checkpoints: `+console.NoCheckpoints+`.</p>`) ||
		strings.Contains(body, "suspend-form") || strings.Contains(body, "resume-form") {
		t.Fatalf("run page on a runtime without checkpoints: %d\n%s", code, body)
	}
	for _, tc := range []struct {
		path, reason string
		status       int
		want         string
	}{
		{"/runs/r-durable-1/suspend", "", http.StatusBadRequest, "suspend run r-durable-1: a reason is required; nothing was done"},
		{"/runs/r-durable-1/suspend", "  \n ", http.StatusBadRequest, "suspend run r-durable-1: a reason is required; nothing was done"},
		{"/runs/r-durable-1/resume", "", http.StatusBadRequest, "resume run r-durable-1: a reason is required; nothing was done"},
		{"/runs/r-durable-1/suspend", "disk pressure", http.StatusConflict, "suspend run r-durable-1: " + console.NoCheckpoints + "; nothing was done"},
		{"/runs/r-durable-1/resume", "disk pressure", http.StatusConflict, "resume run r-durable-1: " + console.NoCheckpoints + "; nothing was done"},
	} {
		code, body := post(t, hs.URL, tc.path, ops, url.Values{"reason": {tc.reason}})
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s reason %q: %d, want %d saying %q\n%s", tc.path, tc.reason, code, tc.status, tc.want, body)
		}
	}
	if m, err := rs.Get(ctx, "r-durable-1"); err != nil || m.Status != runmanifest.StatusRunning || m.WorkspaceCheckpointID != "" {
		t.Fatalf("the run after refused actions: %+v %v", m, err)
	}
}
