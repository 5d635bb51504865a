package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// A runtime replica that is stopping answers a claim 503 draining with
// Retry-After, having recorded nothing; the control plane asks again with
// the same request key after the Retry-After (its Service routes the new
// connection to another replica) instead of counting a dispatch failure,
// until the job's deadline. The runtime here is a real runtime's API,
// drained; every answer comes from it.
func TestClaimAsksAgainWhileReplicaDrains(t *testing.T) {
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return nil, time.Time{} }, nil, nil, time.Minute)
	defer rt.Close()
	rt.Drain()
	c, asked := recordingRuntime(t, rt)
	e := &Engine{c: Config{Logger: slog.New(slog.DiscardHandler)}}
	deadline := time.Now().Add(3500 * time.Millisecond)
	j := &controlapi.Job{ID: "j-1", Pool: "agents", Tenant: "acme", RequestKey: "j-1.a1", DeadlineAt: &deadline}
	g, err := e.claimFrom(context.Background(), Runtime{Name: "rt", Client: c}, j)
	if g != nil || !runtimeapi.IsCode(err, runtimeapi.CodeDraining) {
		t.Fatalf("claim of a draining runtime until the deadline: %+v, %v; want its draining answer", g, err)
	}
	keys, conns := asked()
	if len(keys) < 3 {
		t.Fatalf("the claim was asked %d times in 3.5 s of a runtime answering Retry-After 1; want it asked again", len(keys))
	}
	if conns < len(keys) {
		t.Errorf("%d claims over %d connections; want each asked on a new one (the draining answer closes its connection)", len(keys), conns)
	}
	for _, k := range keys {
		if k != "j-1.a1" {
			t.Errorf("a claim asked again with request key %q; want the job's j-1.a1", k)
		}
	}
}

// A runtime whose view of the config repository is stale (here: none
// loaded yet) answers a claim 503 stale, having recorded nothing; the
// control plane asks again with the same request key until the job's
// deadline, as for a draining replica. The answers come from a real
// runtime's API.
func TestClaimAsksAgainWhileRuntimeStale(t *testing.T) {
	store, err := runs.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return nil, time.Time{} }, nil, store, time.Minute)
	defer rt.Close()
	c, asked := recordingRuntime(t, rt)
	e := &Engine{c: Config{Logger: slog.New(slog.DiscardHandler)}}
	deadline := time.Now().Add(1500 * time.Millisecond)
	j := &controlapi.Job{ID: "j-2", Pool: "agents", Tenant: "acme", RequestKey: "j-2.a1", DeadlineAt: &deadline}
	g, err := e.claimFrom(context.Background(), Runtime{Name: "rt", Client: c}, j)
	if g != nil || !runtimeapi.IsCode(err, runtimeapi.CodeStale) {
		t.Fatalf("claim of a stale runtime until the deadline: %+v, %v; want its stale answer", g, err)
	}
	keys, _ := asked()
	if len(keys) < 3 {
		t.Fatalf("the claim was asked %d times in 1.5 s of a runtime answering stale; want it asked again", len(keys))
	}
	for _, k := range keys {
		if k != "j-2.a1" {
			t.Errorf("a claim asked again with request key %q; want the job's j-2.a1", k)
		}
	}
}

// recordingRuntime serves rt's API and returns a client of it, and asked,
// which says the request keys of the claims it answered and how many
// connections they came over.
func recordingRuntime(t *testing.T, rt *runtime.Runtime) (*runtimeapi.Client, func() ([]string, int)) {
	t.Helper()
	srv, err := runtime.NewServer(rt, nil, nil, "test-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	conns := 0
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var body runtimeapi.ClaimBody
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		keys = append(keys, body.RequestKey)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		srv.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	c, err := runtimeapi.NewClient(hs.URL, "test-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	return c, func() ([]string, int) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(keys), conns
	}
}
