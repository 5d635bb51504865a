package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// apiRig is a runtime on the local (bubblewrap) backend served over HTTP,
// with a Client and a raw caller.
type apiRig struct {
	be    *local.Backend
	store *runs.SQLite
	rt    *runtime.Runtime
	d     *runtime.Desired
	url   string
	c     *runtimeapi.Client
}

func newAPIRig(t *testing.T, warmSize int) *apiRig {
	t.Helper()
	w := newWarmWorld(t)
	be := newLocalBackend(t)
	store := newStore(t)
	d := w.desired(t, "rev-1", warmSize, w.generation(t, nil))
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	t.Cleanup(func() { rt.Close() })
	if warmSize > 0 {
		warm.Reconcile(context.Background(), d)
	}
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
	return &apiRig{be: be, store: store, rt: rt, d: d, url: hs.URL, c: c}
}

// call makes one request with the API token: status and body.
func (a *apiRig) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// claimed is the pool's sandboxes held by claims (not warm).
func (a *apiRig) claimed(t *testing.T) []*sandbox.Sandbox {
	t.Helper()
	all, err := a.be.List(context.Background(), sandbox.Filter{Pool: "agents"})
	if err != nil {
		t.Fatal(err)
	}
	var out []*sandbox.Sandbox
	for _, s := range all {
		if s.Owner != sandbox.OwnerWarm && s.State != sandbox.StateDead {
			out = append(out, s)
		}
	}
	return out
}

// A claim with a request key is made once: concurrent requests with the
// key get one grant (one of them made it, the others adopted it), a retry
// while it is open gets it again with 200, the run manifest records and
// finds the key, and once released the key is refused with 409 naming the
// key, the run and that it was released, also by a Runtime that starts
// anew on the same store.
func TestClaimRequestKey(t *testing.T) {
	a := newAPIRig(t, 1)
	ctx := context.Background()

	// bad keys: 400 naming the key
	for _, k := range []string{"has space", "slash/no", "é", strings.Repeat("k", 129)} {
		code, body := a.call(t, "POST", "/v1/pools/agents/claims", `{"requestKey":"`+k+`"}`)
		if code != 400 || !strings.Contains(body, "request key") || !strings.Contains(body, k[:min(len(k), 20)]) {
			t.Errorf("request key %q: %d %s, want 400 naming it", k, code, body)
		}
	}
	if len(a.claimed(t)) != 0 {
		t.Fatal("a refused request key claimed a sandbox")
	}

	const key = "job-42:attempt-1"
	const n = 8
	grants := make([]*runtimeapi.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			grants[i], errs[i] = a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: key})
		})
	}
	wg.Wait()
	made := 0
	for i, g := range grants {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if g.RunID != grants[0].RunID || g.SandboxID != grants[0].SandboxID || g.Token != grants[0].Token ||
			g.AllocationAttempt != grants[0].AllocationAttempt || g.RequestKey != key {
			t.Fatalf("claim %d: %+v, claim 0: %+v", i, g, grants[0])
		}
		if !g.Adopted {
			made++
		}
	}
	if made != 1 {
		t.Errorf("%d of %d concurrent claims with one key were new claims, want 1", made, n)
	}
	if sbs := a.claimed(t); len(sbs) != 1 || sbs[0].Owner != grants[0].RunID {
		t.Fatalf("claimed sandboxes after %d claims with one key: %+v", n, sbs)
	}
	g := grants[0]

	// a retry while the claim is open: 200, adopted, the claim's current
	// attempt (after a move, the new one)
	moved, err := a.rt.Move(ctx, g.RunID)
	if err != nil {
		t.Fatal(err)
	}
	code, body := a.call(t, "POST", "/v1/pools/agents/claims", `{"tenant":"acme","requestKey":"`+key+`"}`)
	if code != 200 || !strings.Contains(body, `"adopted":true`) || !strings.Contains(body, `"runId":"`+g.RunID+`"`) ||
		!strings.Contains(body, `"token":"`+moved.Token+`"`) || !strings.Contains(body, `"allocationAttempt":2`) {
		t.Fatalf("retry of an open claim: %d %s", code, body)
	}
	// the key belongs to its pool and tenant
	if code, body := a.call(t, "POST", "/v1/pools/agents/claims", `{"tenant":"other","requestKey":"`+key+`"}`); code != 409 || !strings.Contains(body, g.RunID) {
		t.Errorf("the key of another tenant's claim: %d %s", code, body)
	}
	// a claim without a key, or with another, is a claim of its own
	other, err := a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: "job-43:attempt-1"})
	if err != nil || other.RunID == g.RunID || other.Adopted {
		t.Fatalf("claim with another key: %+v, %v", other, err)
	}

	// the key is in the manifest and finds the run
	m, err := a.c.Run(ctx, g.RunID)
	if err != nil || m.RequestKey != key {
		t.Fatalf("manifest: %+v, %v", m, err)
	}
	if ids, err := a.c.Query(ctx, runmanifest.Query{RequestKey: key}); err != nil || len(ids) != 1 || ids[0] != g.RunID {
		t.Errorf("Query(request key) = %v, %v", ids, err)
	}
	if code, body := a.call(t, "GET", "/v1/runs?request_key="+key, ""); code != 200 || body != `{"runs":["`+g.RunID+`"]}`+"\n" {
		t.Errorf("GET /v1/runs?request_key=: %d %s", code, body)
	}

	// released: the key is refused, naming the key, the run and why
	zero := 0
	if err := a.c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: moved.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", RequestKey: key})
	var apiErr *runtimeapi.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("claim with a released claim's key: %v, want 409", err)
	}
	for _, want := range []string{key, g.RunID, "released"} {
		if !strings.Contains(apiErr.Reason, want) {
			t.Errorf("refusal %q does not name %q", apiErr.Reason, want)
		}
	}
	if sbs := a.claimed(t); len(sbs) != 1 || sbs[0].Owner != other.RunID {
		t.Errorf("claimed sandboxes after the refusal: %+v", sbs)
	}

	// a runtime that starts anew on the same store refuses it too
	warm := runtime.NewWarm(a.be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt2 := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return a.d, time.Now() }, warm, a.store, time.Minute)
	defer rt2.Close()
	if _, err := rt2.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme", RequestKey: key}); !errors.Is(err, runtime.ErrRequestKeyUsed) ||
		!strings.Contains(err.Error(), "released") {
		t.Errorf("a new runtime's claim with a released key: %v, want ErrRequestKeyUsed", err)
	}
	// and one whose run is open but not its own
	if _, err := rt2.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme", RequestKey: "job-43:attempt-1"}); !errors.Is(err, runtime.ErrRequestKeyUsed) ||
		!strings.Contains(err.Error(), other.RunID) {
		t.Errorf("a new runtime's claim with another runtime's open key: %v, want ErrRequestKeyUsed", err)
	}
}
