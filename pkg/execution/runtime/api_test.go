package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

const apiToken = "test-token-0123456789abcdef"

func TestAPI(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	store := newStore(t)
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 1, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, store, time.Minute)
	warm.Reconcile(ctx, d)
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	call := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Bad tokens: 401 and nothing else.
	for _, tok := range []string{"", "wrong-token-wrong-token"} {
		if code, body := call("POST", "/v1/pools/agents/claims", tok, `{}`); code != 401 || body != "" {
			t.Errorf("token %q: %d %q", tok, code, body)
		}
	}
	// Malformed requests: 400 with a reason.
	if code, body := call("POST", "/v1/pools/agents/claims", apiToken, `{"tenant":`); code != 400 || !strings.Contains(body, "request body") {
		t.Errorf("malformed: %d %s", code, body)
	}
	if code, body := call("POST", "/v1/pools/agents/claims", apiToken, `{"tennant":"x"}`); code != 400 || !strings.Contains(body, "tennant") {
		t.Errorf("unknown field: %d %s", code, body)
	}
	for q, want := range map[string]string{"?templat=x": "templat", "": "no criterion", "?template=a&template=b": "2 times", "?package=nope": "name@version", "?template=x&limit=-1": "limit",
		"?runner=a&runner_image=b": "same criterion", "?runner_digest=a": "runner_digest"} {
		if code, body := call("GET", "/v1/runs"+q, apiToken, ""); code != 400 || !strings.Contains(body, want) {
			t.Errorf("GET /v1/runs%s: %d %s, want 400 naming %q", q, code, body, want)
		}
	}
	if code, _ := call("POST", "/v1/pools/nope/claims", apiToken, `{}`); code != 404 {
		t.Errorf("unknown pool: %d", code)
	}

	code, body := call("POST", "/v1/pools/agents/claims", apiToken, `{"tenant":"acme"}`)
	var g runtimeapi.Grant
	if code != 201 || json.Unmarshal([]byte(body), &g) != nil || !g.Warm || g.Generation != g1.ID {
		t.Fatalf("claim: %d %s", code, body)
	}
	code, body = call("POST", "/v1/claims/"+g.RunID+"/exec", apiToken, `{"token":"`+g.Token+`","argv":["sh","-c","echo out; echo err >&2; exit 3"]}`)
	var ex runtimeapi.ExecResult
	if code != 200 || json.Unmarshal([]byte(body), &ex) != nil || ex.ExitCode != 3 || ex.Stdout != "out\n" || ex.Stderr != "err\n" {
		t.Fatalf("exec: %d %s", code, body)
	}
	if code, _ := call("POST", "/v1/claims/"+g.RunID+"/exec", apiToken, `{"token":"old","argv":["true"]}`); code != 409 {
		t.Errorf("exec with a wrong claim token: %d, want 409", code)
	}
	if code, body := call("GET", "/v1/pools/agents", apiToken, ""); code != 200 || !strings.Contains(body, `"claimed":1`) ||
		!strings.Contains(body, `"runnerImageDigest":"`+g1.Pins["runner"].Identity()+`"`) || !strings.Contains(body, `"runnerBinarySha256":"sha256:`) {
		t.Errorf("pool status: %d %s", code, body)
	}
	if code, body := call("GET", "/v1/info", apiToken, ""); code != 200 || !strings.Contains(body, `"observedRevision":"rev-1"`) {
		t.Errorf("info: %d %s", code, body)
	}
	if code, body = call("POST", "/v1/claims/"+g.RunID+"/release", apiToken, `{"token":"`+g.Token+`","exitCode":3}`); code != 200 {
		t.Fatalf("release: %d %s", code, body)
	}
	code, body = call("GET", "/v1/runs/"+g.RunID, apiToken, "")
	var m map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil || m["status"] != "failed" || m["exit_code"] != 3.0 ||
		!strings.HasPrefix(fmt.Sprint(m["runner_image_digest"]), "sha256:") || !strings.HasPrefix(fmt.Sprint(m["runner_binary_sha256"]), "sha256:") ||
		m["runner_image_digest"] == m["runner_binary_sha256"] {
		t.Fatalf("run manifest: %d %s", code, body)
	}
	for _, q := range []string{"runner_image=" + fmt.Sprint(m["runner_image_digest"]), "runner=" + fmt.Sprint(m["runner_image_digest"]),
		"runner_binary=" + fmt.Sprint(m["runner_binary_sha256"])} {
		if code, body := call("GET", "/v1/runs?"+q, apiToken, ""); code != 200 || body != `{"runs":["`+g.RunID+`"]}`+"\n" {
			t.Errorf("GET /v1/runs?%s: %d %q", q, code, body)
		}
	}
	if code, body := call("GET", "/v1/runs?runner_binary="+fmt.Sprint(m["runner_image_digest"]), apiToken, ""); code != 200 || body != `{"runs":[]}`+"\n" {
		t.Errorf("runs whose runner binary is the runner image digest: %d %q", code, body)
	}
	code, body = call("GET", "/metrics", apiToken, "")
	if code != 200 || !strings.Contains(body, `slipway_claims_total{pool="agents",start="warm"} 1`) || strings.Contains(body, g.RunID) {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	// The seed's names, through the OTel SDK, with bounded labels only.
	for _, want := range []string{
		`slipway_sandbox_create_latency_seconds_count{generation="` + g1.ID + `",pool="agents",start="warm"} 1`,
		`slipway_cleanup_latency_seconds_count{pool="agents"} 1`,
		`slipway_warm_hit_fraction{pool="agents"} 1`,
		`slipway_pool_sandboxes{class="warm",pool="agents"} `,
		`slipway_unused_warm_minutes_total{pool="agents"} `,
		`slipway_warm_shortage_time_seconds_total{pool="agents"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if err := telemetry.CheckExposition(strings.NewReader(body)); err != nil {
		t.Error(err)
	}
	if code, _ := call("GET", "/metrics", "", ""); code != 401 {
		t.Errorf("metrics without a token: %d", code)
	}
	if code, _ := call("GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
}

// WithMetrics serves the metric set it is given: here one that labels
// every series with its environment.
func TestAPIMetricsEnvironment(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 1, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(t), time.Minute)
	warm.Reconcile(ctx, d)
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("staging"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := runtime.NewServer(rt, nil, be, apiToken, runtime.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	srv.ServeHTTP(rec, req)
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `slipway_pool_sandboxes{class="warm",environment="staging",pool="agents"} 1`) {
		t.Errorf("metrics: %d\n%s", rec.Code, body)
	}
}

// WithPoolSamplesWhen: a replica that does not hold the Lease reports no
// cluster pool counts (the holder does, once for the cluster), and starts
// to when it leads.
func TestAPIPoolMetricsOnlyWhileLeading(t *testing.T) {
	w := newWarmWorld(t)
	ctx := context.Background()
	be := newLocalBackend(t)
	g1 := w.generation(t, nil)
	d := w.desired(t, "rev-1", 1, g1)
	warm := runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return d, time.Now() }, warm, newStore(t), time.Minute)
	warm.Reconcile(ctx, d)
	var leading atomic.Bool
	srv, err := runtime.NewServer(rt, nil, be, apiToken, runtime.WithPoolSamplesWhen(leading.Load))
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		srv.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("metrics: %d", rec.Code)
		}
		return rec.Body.String()
	}
	if body := scrape(); strings.Contains(body, "slipway_pool_sandboxes") || strings.Contains(body, "slipway_warm_shortage_time") {
		t.Errorf("a replica that does not lead reports the cluster's pool counts:\n%s", body)
	}
	leading.Store(true)
	if body := scrape(); !strings.Contains(body, `slipway_pool_sandboxes{class="warm",pool="agents"} 1`) {
		t.Errorf("the leader does not report the pool's counts:\n%s", body)
	}
}
