package canary_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/execution/canary"
	"github.com/slipway-dev/slipway/pkg/execution/egress"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/registrytest"
	"github.com/slipway-dev/slipway/testharness/runtimetest"
)

const apiToken = "canary-test-token-0123456789"

// world is a real runtime serving pool agents over HTTP: a runner image
// and busybox template in an in-process registry, the bubblewrap backend
// with its egress proxy, a run store, the runtime's API.
type world struct {
	desired atomic.Pointer[runtime.Desired]
	warm    *runtime.Warm
	be      *local.Backend
	http    *httptest.Server
	client  *runtimeapi.Client
	ip      string
	mk      func(allow ...string) *runtime.Desired
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t)
}

// newWorldWith is newWorld with options for its runtime.
func newWorldWith(t *testing.T, opts ...runtime.RuntimeOption) *world {
	t.Helper()
	rw := runtimetest.New(t, registrytest.NewInProcess(t))
	g := rw.Generation(t, "agents", nil, "")
	w := &world{ip: hostIPv4(t)}
	seq := 0
	w.mk = func(allow ...string) *runtime.Desired {
		seq++
		d := runtimetest.Desired(fmt.Sprintf("rev-%d", seq), "agents", 1, g)
		if len(allow) > 0 {
			d.Pools["agents"].Pool.Spec.Network = pool.Network{Mode: "allow-list", Allow: allow}
		}
		return d
	}
	var rtp atomic.Pointer[runtime.Runtime]
	be, err := local.New(t.TempDir(), local.WithEgressRecorder(func(id string, a egress.Attempt) {
		if rt := rtp.Load(); rt != nil {
			rt.RecordEgress(id, a)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	w.be = be
	store, err := runs.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	w.warm = runtime.NewWarm(be, runtime.NewRegistryArtifacts(t.TempDir()))
	rt := runtime.NewRuntime(func() (*runtime.Desired, time.Time) { return w.desired.Load(), time.Now() }, w.warm, store, time.Minute, opts...)
	rtp.Store(rt)
	srv, err := runtime.NewServer(rt, nil, be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	w.http = httptest.NewServer(srv)
	t.Cleanup(func() {
		w.http.Close()
		rt.Close()
		ctx := context.Background()
		all, _ := be.List(ctx, sandbox.Filter{})
		for _, s := range all {
			be.Delete(ctx, s.ID)
		}
		be.Close()
		store.Close()
	})
	if w.client, err = runtimeapi.NewClient(w.http.URL, apiToken); err != nil {
		t.Fatal(err)
	}
	return w
}

// use makes d the runtime's desired state and fills its warm pool.
func (w *world) use(t *testing.T, d *runtime.Desired) {
	t.Helper()
	w.desired.Store(d)
	if rep := w.warm.Reconcile(context.Background(), d); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
}

// hostIPv4 is a non-loopback address of the host (a sandbox's 127.0.0.1
// is its own).
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("the host has no non-loopback IPv4 address to test with")
	return ""
}

// origin is an HTTP server on ip; it returns its URL and counts the
// connections it took.
func origin(t *testing.T, ip string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "origin") }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/", &conns
}

// syncLog is a log buffer safe for concurrent use.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// instruments are a canary's metrics and where to scrape them.
func instruments(t *testing.T) (*telemetry.CanaryMetrics, func() string) {
	t.Helper()
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	cm, err := telemetry.NewCanaryMetrics(m)
	if err != nil {
		t.Fatal(err)
	}
	return cm, func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if err := telemetry.CheckExposition(strings.NewReader(rec.Body.String())); err != nil {
			t.Errorf("canary metrics: %v", err)
		}
		return rec.Body.String()
	}
}

func steps(r *canary.Round) string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, st.Step+"="+st.Result)
	}
	return strings.Join(s, " ")
}

// A round against an allow-list pool passes every step, and leaves its
// evidence: the history line, the metrics, an INFO log line, the run
// manifest of a completed canary run; the approved origin took a
// connection, the denied one none.
func TestRoundPasses(t *testing.T) {
	w := newWorld(t)
	approved, _ := origin(t, w.ip)
	denied, deniedConns := origin(t, w.ip)
	w.use(t, w.mk(strings.TrimSuffix(strings.TrimPrefix(approved, "http://"), "/")))

	hist, err := canary.NewHistory(filepath.Join(t.TempDir(), "canary.jsonl"), 10)
	if err != nil {
		t.Fatal(err)
	}
	cm, scrape := instruments(t)
	var log syncLog
	c, err := canary.New(w.client, "agents", canary.WithApproved(approved), canary.WithDenied(denied), canary.WithLines(2000),
		canary.WithHistory(hist), canary.WithMetrics(cm), canary.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "claim=pass identity=pass egress_approved=pass egress_denied=pass workspace=pass output=pass checkpoint=skipped release=pass"
	if !r.Passed || steps(r) != want {
		t.Fatalf("round %s, want %s\n%+v", steps(r), want, r.Steps)
	}
	for _, s := range r.Steps {
		if s.Duration <= 0 {
			t.Errorf("step %s took %v", s.Step, s.Duration)
		}
		t.Logf("%s %v: %s", s.Step, s.Duration, s.Detail)
	}
	if d := r.Steps[1].Detail; !strings.Contains(d, "runner sha256:") || !strings.Contains(d, r.SandboxID) || !strings.Contains(d, r.Generation) {
		t.Errorf("identity detail %q", d)
	}
	if d := r.Steps[5].Detail; !strings.HasPrefix(d, "2000 lines in order") {
		t.Errorf("output detail %q", d)
	}
	if d := r.Steps[3].Detail; !strings.Contains(d, "refused directly and through the egress proxy; the egress proxy recorded the denial") {
		t.Errorf("denied detail %q", d)
	}
	if n := deniedConns.Load(); n != 0 {
		t.Errorf("the denied origin took %d connections", n)
	}
	m, err := w.client.Run(context.Background(), r.RunID)
	if err != nil || m.Tenant != canary.Tenant || m.Status != runmanifest.StatusCompleted {
		t.Fatalf("canary run manifest: %+v %v", m, err)
	}

	rounds, bad, err := canary.ReadHistory(hist.Path(), 0)
	if err != nil || len(bad) > 0 || len(rounds) != 1 || rounds[0].RunID != r.RunID || !rounds[0].Passed || len(rounds[0].Steps) != 8 {
		t.Fatalf("history: %+v %v %v", rounds, bad, err)
	}
	text := scrape()
	for _, line := range []string{`slipway_canary_rounds_total{pool="agents",result="pass"} 1`,
		`slipway_canary_step_duration_seconds_count{pool="agents",step="egress_denied"} 1`,
		`slipway_canary_step_duration_seconds_count{pool="agents",step="release"} 1`,
		`slipway_canary_last_success_timestamp_seconds{pool="agents"} `} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	if strings.Contains(text, r.RunID) || strings.Contains(text, `result="fail"`) {
		t.Errorf("metrics:\n%s", text)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
	ls := log.lines(t)
	if len(ls) != 1 || ls[0]["level"] != "INFO" || ls[0]["msg"] != "canary round passed" || ls[0]["pool"] != "agents" || ls[0]["run_id"] != r.RunID {
		t.Errorf("log: %v", ls)
	}

	// Run: a round on each tick (cold starts now: nothing refills the
	// pool) until its context ends; the round it cuts short is neither
	// recorded nor an alert, and its claim is released.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Run(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rounds, bad, err = canary.ReadHistory(hist.Path(), 0)
	if err != nil || len(bad) > 0 || len(rounds) < 2 {
		t.Fatalf("history after Run: %d rounds %v %v", len(rounds), bad, err)
	}
	for _, r := range rounds {
		if !r.Passed {
			t.Errorf("round %s failed at %s: %s", r.RunID, r.FailedStep, r.Reason)
		}
	}
	for _, l := range log.lines(t) {
		if l["level"] == "ERROR" {
			t.Errorf("alert: %v", l)
		}
	}
	if st, err := w.client.PoolStatus(context.Background(), "agents"); err != nil || st.Generations[0].Claimed != 0 {
		t.Errorf("after Run a claim is still open: %+v %v", st, err)
	}

	// A round cut short while its claim request is out: the claim the
	// request made is adopted by its request key and released. (1 ms: a
	// claim, even a warm hit, commits its run manifest with an fsync;
	// 20 ms let a quiet machine's warm claim finish first.)
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	cut, err := c.Round(ctx)
	if !errors.Is(err, canary.ErrInterrupted) || cut.FailedStep != canary.StepClaim {
		t.Fatalf("a round cut during its claim: %v, failed at %q", err, cut.FailedStep)
	}
	if rel := cut.Steps[len(cut.Steps)-1]; rel.Result != canary.Pass || !strings.Contains(rel.Detail, "the claim of request key canary-") {
		t.Errorf("release of a cut claim: %+v", rel)
	} else {
		t.Log(rel.Detail)
	}
	if st, err := w.client.PoolStatus(context.Background(), "agents"); err != nil || st.Generations[0].Claimed != 0 {
		t.Errorf("after a cut claim a claim is still open: %+v %v", st, err)
	}
}

// The pool's policy lets the sandbox reach the destination the canary
// was told is denied: the round fails at egress_denied, still releases its
// claim, and alerts: an ERROR line naming pool and step, the failure
// metric, the history line. A runtime that is gone fails the claim.
func TestRoundFailsForReal(t *testing.T) {
	w := newWorld(t)
	approved, _ := origin(t, w.ip)
	denied, deniedConns := origin(t, w.ip)
	hp := func(u string) string { return strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/") }
	w.use(t, w.mk(hp(approved), hp(denied))) // the "denied" one allowed by mistake

	hist, err := canary.NewHistory(filepath.Join(t.TempDir(), "canary.jsonl"), 10)
	if err != nil {
		t.Fatal(err)
	}
	cm, scrape := instruments(t)
	var log syncLog
	c, err := canary.New(w.client, "agents", canary.WithApproved(approved), canary.WithDenied(denied),
		canary.WithHistory(hist), canary.WithMetrics(cm), canary.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "claim=pass identity=pass egress_approved=pass egress_denied=fail workspace=skipped output=skipped checkpoint=skipped release=pass"
	if r.Passed || r.FailedStep != canary.StepDenied || steps(r) != want {
		t.Fatalf("round %s (failed at %q), want %s\n%+v", steps(r), r.FailedStep, want, r.Steps)
	}
	if !strings.Contains(r.Reason, "the denied destination "+hp(denied)+" was reached through the egress proxy") {
		t.Errorf("reason %q", r.Reason)
	}
	if deniedConns.Load() == 0 {
		t.Error("the denied origin took no connection: the failure was not real")
	}
	st, err := w.client.PoolStatus(context.Background(), "agents")
	if err != nil || st.Generations[0].Claimed != 0 {
		t.Fatalf("after a failed round the claim is still open: %+v %v", st, err)
	}

	// An approved destination the policy does not allow is not reached.
	other, _ := origin(t, w.ip)
	c2, err := canary.New(w.client, "agents", canary.WithApproved(other))
	if err != nil {
		t.Fatal(err)
	}
	r3, _ := c2.Round(context.Background())
	if r3.Passed || r3.FailedStep != canary.StepApproved || !strings.Contains(r3.Reason, "the approved destination "+hp(other)+" was not reached (through the egress proxy: ") ||
		!strings.Contains(r3.Reason, "; directly: no connection to "+hp(other)) {
		t.Errorf("an unreachable approved destination: failed at %q: %s", r3.FailedStep, r3.Reason)
	}

	// The runtime goes away: the claim step fails.
	w.http.Close()
	r2, err := c.Round(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want = "claim=fail identity=skipped egress_approved=skipped egress_denied=skipped workspace=skipped output=skipped checkpoint=skipped release=skipped"
	if r2.Passed || r2.FailedStep != canary.StepClaim || steps(r2) != want || !strings.Contains(r2.Reason, "pool agents granted no sandbox") {
		t.Fatalf("round %s (failed at %q: %s), want %s", steps(r2), r2.FailedStep, r2.Reason, want)
	}

	// The alerts.
	ls := log.lines(t)
	if len(ls) != 2 {
		t.Fatalf("log: %v", ls)
	}
	for i, step := range []string{canary.StepDenied, canary.StepClaim} {
		if l := ls[i]; l["level"] != "ERROR" || l["msg"] != "canary round failed" || l["pool"] != "agents" || l["step"] != step || l["reason"] == "" {
			t.Errorf("alert %d: %v", i, l)
		}
	}
	if ls[0]["run_id"] != r.RunID {
		t.Errorf("alert names run %v, want %s", ls[0]["run_id"], r.RunID)
	}
	text := scrape()
	for _, line := range []string{`slipway_canary_rounds_total{pool="agents",result="fail"} 2`,
		`slipway_canary_failures_total{pool="agents",step="egress_denied"} 1`,
		`slipway_canary_failures_total{pool="agents",step="claim"} 1`} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	if strings.Contains(text, "canary_last_success_timestamp") || strings.Contains(text, `result="pass"`) {
		t.Errorf("a success recorded:\n%s", text)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
	rounds, _, err := canary.ReadHistory(hist.Path(), 0)
	if err != nil || len(rounds) != 2 || rounds[0].FailedStep != canary.StepDenied || rounds[1].FailedStep != canary.StepClaim {
		t.Fatalf("history: %+v %v", rounds, err)
	}
}
