package control

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// GET /metrics is for operators; GET /v1/jobs/{id}/trace for whoever may
// see the job; a job that ends writes its root span over the spans written
// before it, and its metrics with bounded labels.
func TestTelemetryAPI(t *testing.T) {
	repo := configRepo(t)
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		p := newPlane(t, s, repo, 8)
		srv := httptest.NewServer(NewServer(p))
		defer srv.Close()
		acmeTok, _, _ := s.CreateToken(ctx, "acme", controlapi.ScopeTenant, "")
		globexTok, _, _ := s.CreateToken(ctx, "globex", controlapi.ScopeTenant, "")
		opTok, _, _ := s.CreateToken(ctx, "ops", controlapi.ScopeOperator, "")
		get := func(tok, path string) (int, string) {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		for tok, want := range map[string]int{"": 401, acmeTok: 403, opTok: 200} {
			if code, body := get(tok, "/metrics"); code != want {
				t.Errorf("/metrics: %d, want %d: %s", code, want, body)
			}
		}

		j, _, err := p.Submit(ctx, "acme", controlapi.Spec{Pool: "agents", Profile: "short", Commands: cmd("true")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.jobs.AdmitOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if code, body := get(globexTok, "/v1/jobs/"+j.ID+"/trace"); code != 404 {
			t.Errorf("another tenant's trace: %d %s", code, body)
		}
		j, _ = p.Get(ctx, "", j.ID)
		p.jobs.TraceAdmission(ctx, j)
		j.State, j.Reason, j.EndedAt = controlapi.Failed, "exit_code", tp(time.Now())
		j.StartedAt = tp(time.Now().Add(-time.Second))
		p.jobs.JobEnded(ctx, nil, j)

		c, _ := controlapi.NewClient(srv.URL, acmeTok)
		tr, err := c.Trace(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Spans) != 3 || tr.Spans[0].Name != "job" || tr.Spans[1].Name != "admission" || tr.Spans[1].ParentID != tr.Spans[0].SpanID ||
			tr.Spans[2].Name != "dispatch wait" || tr.Spans[2].ParentID != tr.Spans[0].SpanID ||
			tr.Spans[0].Attributes["job_id"] != j.ID || tr.Spans[0].Error != "exit_code" {
			t.Errorf("trace: %+v", tr)
		}
		_, text := get(opTok, "/metrics")
		if !strings.Contains(text, `slipway_task_failure_count_total{bounded_reason="exit_code",pool="agents"} 1`) ||
			!strings.Contains(text, `slipway_task_execution_duration_seconds_count{pool="agents"} 1`) {
			t.Errorf("metrics:\n%s", text)
		}
		if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil || strings.Contains(text, j.ID) {
			t.Errorf("labels: %v", err)
		}
	})
}
