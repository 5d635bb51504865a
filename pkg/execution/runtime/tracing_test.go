package runtime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request with the OTLP proto types and keeps the spans' names and
// string attributes.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]map[string]string // by name
	srv   *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{spans: map[string][]map[string]string{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					at := map[string]string{"trace_id": telemetryHex(s.TraceId), "span_id": telemetryHex(s.SpanId), "parent_id": telemetryHex(s.ParentSpanId)}
					for _, kv := range rs.Resource.GetAttributes() {
						at["resource."+kv.Key] = kv.Value.GetStringValue()
					}
					for _, kv := range s.Attributes {
						if v := kv.Value.GetStringValue(); v != "" {
							at[kv.Key] = v
						} else {
							at[kv.Key] = strings.TrimSpace(kv.Value.String())
						}
					}
					o.spans[s.Name] = append(o.spans[s.Name], at)
				}
			}
		}
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func telemetryHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// One trace through the runtime: a claim, two commands and a release
// through the HTTP API, each request carrying the caller's traceparent.
// The runtime's spans (claim, sandbox ready, credential issue, runner
// awake, each command, the runner's exec and start, release) are children
// of the caller's, carry the run's ids, and reach both the runtime's ring
// (GET /v1/traces/{id}) and a real OTLP/HTTP receiver; the workload sees
// TRACEPARENT naming the trace and the runner exec span.
func TestTraceThroughRuntime(t *testing.T) {
	recv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.srv.URL)
	ctx := context.Background()
	tr, err := telemetry.NewTracing(ctx, telemetry.WithOTLP(), telemetry.WithServiceName("slipway-runtime"))
	if err != nil {
		t.Fatal(err)
	}
	w := newWarmWorld(t)
	f := newFenceRig(t, w, secretGeneration(t, w), 1, runtime.WithTracing(tr))
	f.warm.Reconcile(ctx, f.d)
	srv, err := runtime.NewServer(f.rt, nil, f.be, apiToken)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, _ := runtimeapi.NewClient(hs.URL, apiToken)

	// The caller's spans: a tracer of its own, as the control plane's.
	caller, _ := telemetry.NewTracing(ctx)
	jctx := telemetry.InJob(ctx, "j-trace")
	traceID := telemetry.JobTraceID("j-trace").String()
	step := func(name string, fn func(ctx context.Context) error) string {
		t.Helper()
		sctx, s := caller.Tracer().Start(jctx, name)
		defer s.End()
		if err := fn(runtimeapi.WithTraceParent(ctx, telemetry.TraceParent(sctx))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return s.SpanContext().SpanID().String()
	}
	var g *runtimeapi.Grant
	claimSpan := step("claim", func(ctx context.Context) (err error) {
		g, err = c.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme", SessionID: "j-trace"})
		return err
	})
	var tps []string
	var cmdSpans []string
	for range 2 {
		cmdSpans = append(cmdSpans, step("command", func(ctx context.Context) error {
			res, err := c.Exec(ctx, g.RunID, runtimeapi.ExecBody{Token: g.Token, Argv: []string{"sh", "-c", `echo "$TRACEPARENT"`}})
			if err == nil {
				tps = append(tps, strings.TrimSpace(res.Stdout))
			}
			return err
		}))
	}
	releaseSpan := step("release", func(ctx context.Context) error {
		return c.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: new(0)})
	})

	got, err := c.Trace(ctx, traceID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]runtimeapi.Span{}
	byID := map[string]runtimeapi.Span{}
	for _, s := range got.Spans {
		byName[s.Name] = append(byName[s.Name], s)
		byID[s.SpanID] = s
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.TraceID, traceID)
		}
		for k, want := range map[string]string{"run_id": g.RunID, "session_id": "j-trace", "sandbox_id": g.SandboxID, "allocation_attempt": "1"} {
			if s.Attributes[k] != want {
				t.Errorf("span %s: %s=%q, want %q", s.Name, k, s.Attributes[k], want)
			}
		}
	}
	one := func(name string) runtimeapi.Span {
		t.Helper()
		if len(byName[name]) == 0 {
			t.Fatalf("no %s span among %d: %+v", name, len(got.Spans), got.Spans)
		}
		return byName[name][0]
	}
	rc := one("runtime claim")
	if rc.ParentID != claimSpan {
		t.Errorf("runtime claim's parent %s, want the caller's claim %s", rc.ParentID, claimSpan)
	}
	for _, name := range []string{"sandbox ready", "credential issue", "runner awake"} {
		if s := one(name); s.ParentID != rc.SpanID {
			t.Errorf("%s's parent %s, want runtime claim %s", name, s.ParentID, rc.SpanID)
		}
	}
	if s := one("runtime release"); s.ParentID != releaseSpan {
		t.Errorf("runtime release's parent %s, want %s", s.ParentID, releaseSpan)
	}
	if len(byName["runtime command"]) != 2 || len(byName["runner exec"]) != 2 || len(byName["runner start"]) != 2 || len(byName["runner awake"]) != 1 {
		t.Fatalf("commands %d, runner execs %d, runner starts %d, runner awakes %d; want 2, 2, 2, 1",
			len(byName["runtime command"]), len(byName["runner exec"]), len(byName["runner start"]), len(byName["runner awake"]))
	}
	for i, tp := range tps {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Fatalf("command %d: TRACEPARENT %q, want one of trace %s", i, tp, traceID)
		}
		x, ok := byID[parts[2]]
		if !ok || x.Name != "runner exec" {
			t.Fatalf("command %d: TRACEPARENT's span %s is not a runner exec span", i, parts[2])
		}
		cmd := byID[x.ParentID]
		if cmd.Name != "runtime command" || cmd.ParentID != cmdSpans[i] {
			t.Errorf("command %d: runner exec under %q (parent %s), want runtime command under the caller's %s", i, cmd.Name, cmd.ParentID, cmdSpans[i])
		}
		if x.Start.Before(cmd.Start) || x.End.After(cmd.End) || x.Seconds <= 0 {
			t.Errorf("command %d: runner exec %s..%s outside its command %s..%s", i, x.Start, x.End, cmd.Start, cmd.End)
		}
	}

	// OTLP: the same spans reached the receiver, with the process's name.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, name := range []string{"runtime claim", "sandbox ready", "credential issue", "runner awake", "runtime command", "runner exec", "runner start", "runtime release"} {
		ss := recv.spans[name]
		if len(ss) == 0 {
			t.Errorf("the OTLP receiver got no %s span", name)
			continue
		}
		if a := ss[0]; a["trace_id"] != traceID || a["run_id"] != g.RunID || a["sandbox_id"] != g.SandboxID || a["resource.service.name"] != "slipway-runtime" {
			t.Errorf("OTLP %s span: %v", name, a)
		}
	}
}
