package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// scrapeMetrics GETs a /metrics endpoint with a bearer token.
func scrapeMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
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

// Real jobs through a real control plane and runtime, then both /metrics
// endpoints scraped: the seed's names are there with bounded labels only
// (no run, job or sandbox id, URL, token or text; label names from the
// allow-list); `job trace` shows the job's spans with its ids; the control
// plane's JSON log lines about the job carry the same ids.
func TestTelemetryEndToEnd(t *testing.T) {
	w := newControlWorld(t)
	db := "sqlite:" + filepath.Join(w.dir, "control.db")
	cp := w.startControlArgs(t, db, nil, "--runtime", "agents="+w.rt.base+","+w.rtTokenFile, "--environment", "test")
	tok := w.token(t, db, "acme")
	r := run(t, "", "tenant", "token", "create", "ops", "--scope", "operator", "--db", db)
	if r.code != 0 {
		t.Fatalf("operator token: %+v", r)
	}
	opTok := strings.TrimSpace(r.stdout)
	base := []string{"job", "submit", "--server", cp.url, "--token-file", tok, "--pool", "agents", "--profile", "standard", "--wait", "-o", "json"}

	var jobs []controlapi.Job
	for _, script := range []string{`echo "ok $TRACEPARENT"`, "echo no; exit 3"} {
		r := run(t, "", append(base, "--", "sh", "-c", script)...)
		var j controlapi.Job
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.RunID == "" {
			t.Fatalf("job %q: %+v", script, r)
		}
		jobs = append(jobs, j)
	}

	// The trace, as a tree and as JSON: the control plane's spans, the
	// runtime's under them, the runner's under the runtime's command.
	ok := jobs[0]
	r = run(t, "", "job", "trace", ok.ID, "--server", cp.url, "--token-file", tok)
	for _, want := range []string{"job ", "  admission", "  dispatch wait", "  claim", "    runtime claim", "      sandbox ready", "      runner awake",
		"  command", "    runtime command", "      runner exec", "        runner start", "  release", "    runtime release", ", runtime ",
		"run_id=" + ok.RunID, "sandbox_id=" + ok.SandboxID, "session_id=" + ok.ID, "allocation_attempt=1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job trace lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("job trace %s:\n%s", ok.ID, r.stdout)
	r = run(t, "", "job", "trace", ok.ID, "--server", cp.url, "--token-file", tok, "-o", "json")
	var tr controlapi.JobTrace
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
		t.Fatalf("job trace -o json: %v\n%s", err, r.stdout)
	}
	if tr.TraceID != telemetry.JobTraceID(ok.ID).String() || len(tr.Spans) < 13 || tr.RuntimeError != "" {
		t.Fatalf("trace %s with %d spans (%s), want %s with 13 or more", tr.TraceID, len(tr.Spans), tr.RuntimeError, telemetry.JobTraceID(ok.ID))
	}
	byID := map[string]controlapi.Span{}
	for _, s := range tr.Spans {
		byID[s.SpanID] = s
		// the control plane's spans name the job; the runtime's its session (the job)
		if s.TraceID != tr.TraceID || (s.Attributes["job_id"] != ok.ID && s.Attributes["session_id"] != ok.ID) {
			t.Errorf("span %s: trace %s job_id %q session_id %q", s.Name, s.TraceID, s.Attributes["job_id"], s.Attributes["session_id"])
		}
		if (s.Name == "release" || strings.HasPrefix(s.Name, "runtime ") || strings.HasPrefix(s.Name, "runner ")) &&
			(s.Attributes["run_id"] != ok.RunID || s.Attributes["sandbox_id"] != ok.SandboxID || s.Attributes["allocation_attempt"] != "1") {
			t.Errorf("%s span attributes: %v", s.Name, s.Attributes)
		}
	}
	// The workload's TRACEPARENT names the job's trace and the runner exec
	// span, under the runtime's command, under the control plane's.
	var tp []string
	for _, line := range strings.Split(ok.Output, "\n") {
		if strings.HasPrefix(line, "ok ") {
			tp = strings.Fields(line)
		}
	}
	if len(tp) != 2 {
		t.Fatalf("output %q: want ok and a TRACEPARENT", ok.Output)
	}
	parts := strings.Split(tp[1], "-")
	if len(parts) != 4 || parts[1] != tr.TraceID {
		t.Fatalf("TRACEPARENT %q is not of trace %s", tp[1], tr.TraceID)
	}
	x := byID[parts[2]]
	if x.Name != "runner exec" || byID[x.ParentID].Name != "runtime command" || byID[byID[x.ParentID].ParentID].Name != "command" {
		t.Errorf("TRACEPARENT's span %s is %q under %q, want runner exec under runtime command under command", parts[2], x.Name, byID[x.ParentID].Name)
	}

	// The control plane's /metrics: operators only.
	tenantTok, _ := readToken(tok)
	if code, _ := scrapeMetrics(t, cp.url, tenantTok); code != 403 {
		t.Errorf("control /metrics with a tenant's token: %d, want 403", code)
	}
	code, text := scrapeMetrics(t, cp.url, opTok)
	if code != 200 {
		t.Fatalf("control /metrics: %d %s", code, text)
	}
	for _, want := range []string{
		`slipway_task_execution_duration_seconds_count{environment="test",pool="agents"} 2`,
		`slipway_task_failure_count_total{bounded_reason="exit_code",environment="test",pool="agents"} 1`,
		`slipway_known_compute_cost_total{environment="test",pool="agents"} `,
		`slipway_kit_setup_latency_seconds_count{environment="test",pool="agents",start=`,
		// Admission per tenant tier (the demo's tenants name none: standard).
		`slipway_job_arrivals_total{environment="test",tier="standard"} 2`,
		`slipway_admission_wait_seconds_count{environment="test",tier="standard"} 2`,
		`slipway_queue_depth{environment="test",tier="standard"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("control /metrics lacks %s", want)
		}
	}
	rcode, rtext := scrapeMetrics(t, w.rt.base, restartToken)
	if rcode != 200 {
		t.Fatalf("runtime /metrics: %d", rcode)
	}
	for _, want := range []string{`slipway_sandbox_create_latency_seconds_count{`, `slipway_cleanup_latency_seconds_count{pool="agents"} 2`,
		`slipway_warm_hit_fraction{pool="agents"} `, `slipway_pool_sandboxes{class="warm",pool="agents"}`} {
		if !strings.Contains(rtext, want) {
			t.Errorf("runtime /metrics lacks %s", want)
		}
	}
	for name, body := range map[string]string{"control": text, "runtime": rtext} {
		if err := telemetry.CheckExposition(strings.NewReader(body)); err != nil {
			t.Errorf("%s /metrics: %v", name, err)
		}
		for _, j := range jobs {
			for _, id := range []string{j.ID, j.RunID, j.SandboxID, cp.url, w.rt.base, opTok} {
				if strings.Contains(body, id) {
					t.Errorf("%s /metrics holds %s", name, id)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("control:\n%s\nruntime:\n%s", text, rtext)
	}

	// The log line of each job's end carries the same ids.
	for _, j := range jobs {
		found := false
		for _, line := range strings.Split(cp.log.text(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "job ended" || rec["job_id"] != j.ID {
				continue
			}
			found = rec["run_id"] == j.RunID && rec["session_id"] == j.ID && rec["sandbox_id"] == j.SandboxID &&
				rec["allocation_attempt"] == 1.0 && rec["trace_id"] == telemetry.JobTraceID(j.ID).String()
			if !found {
				t.Errorf("job ended line: %s", line)
			}
		}
		if !found {
			t.Errorf("no job ended line for %s:\n%s", j.ID, cp.log.text())
		}
	}

	// The runtime logs JSON (its default): its lines about each job's run
	// carry the run's ids and the job's trace id; every line is an object.
	for _, line := range strings.Split(strings.TrimSpace(w.rt.log.text()), "\n") {
		if strings.HasPrefix(line, "serving on ") || strings.HasPrefix(line, "Flag --") { // the CLI's own, before the log
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil || rec["time"] == nil {
			t.Errorf("runtime log line is not a JSON record: %q", line)
		}
	}
	for _, j := range jobs {
		seen := map[string]bool{}
		for _, line := range strings.Split(w.rt.log.text(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["run_id"] != j.RunID {
				continue
			}
			msg, _ := rec["msg"].(string)
			seen[msg] = true
			if rec["session_id"] != j.ID || rec["sandbox_id"] != j.SandboxID || rec["allocation_attempt"] != 1.0 || rec["trace_id"] != telemetry.JobTraceID(j.ID).String() {
				t.Errorf("runtime log line about run %s: %s", j.RunID, line)
			}
		}
		for _, want := range []string{"claim granted", "command ended", "claim released"} {
			if !seen[want] {
				t.Errorf("no runtime log line %q about run %s:\n%s", want, j.RunID, w.rt.log.text())
			}
		}
	}
}
