package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/telemetry"
	"github.com/slipway-dev/slipway/testharness/need"
)

// metricLines returns the lines of m's /metrics that start with prefix.
func metricLines(t *testing.T, m *telemetry.Metrics, prefix string) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestKubeIncidentDeleteTimesOut is seed incident 6 on Kubernetes, caused
// for real: the claim of a terminal run carries a finalizer nothing
// clears, so the API server keeps it (deletionTimestamp set) and the
// reconciler's delete never sees it gone. The evidence: a cleanup-unknown
// record with the reconciler as owner, a deadline, its attempts and the
// last error naming the finalizer; an ERROR log line; the gauge
// slipway_cleanup_unknown_count{pool} at 1, on which the shipped alert
// SlipwayCleanupUnknown fires (evaluated by promtool over the very sample
// scraped); retried each pass with the deadline kept; and once the
// finalizer is removed the object is gone and the record closed, the
// gauge back at 0.
func TestKubeIncidentDeleteTimesOut(t *testing.T) {
	w := newKubeWorld(t)
	ctx := context.Background()
	name, sb := w.claim(t, "r-done", "agents", genActive, false)
	w.run(t, "r-done", "agents", sb, runmanifest.StatusReleased)
	const finalizer = "test.slipway.dev/never-clears"
	patch := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, finalizer)
	if _, err := w.res(claimsGVR).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("test"))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := newKubeReconciler(t, w, &log, func(c *reconcile.Config) {
		c.ActionTimeout, c.UnknownDeadline, c.Metrics = 2*time.Second, time.Hour, m
	})
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unknown != 1 {
		t.Fatalf("pass 1: %+v", rep)
	}
	open, err := w.records.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 {
		t.Fatalf("open records: %+v", open)
	}
	u := open[0]
	if u.State != reconcile.StateUnknown || u.Kind != reconcile.KindLeaseTerminal || u.Resource != "SandboxClaim/"+name || u.RunID != "r-done" ||
		u.LeaseVersion != "r-done@1" || u.Owner != "kube-host/127.0.0.1:7070" || u.Attempts != 1 || u.Deadline.Before(time.Now().Add(50*time.Minute)) ||
		!strings.Contains(u.LastError, finalizer) {
		t.Fatalf("unknown record: %+v", u)
	}
	c, err := w.res(claimsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil || c.GetDeletionTimestamp() == nil {
		t.Fatalf("the claim should be there, its deletion begun: %v %v", c, err)
	}
	var line map[string]any
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `"cleanup unknown"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["level"] != "ERROR" || line["owner"] != "kube-host/127.0.0.1:7070" || line["deadline"] == nil {
		t.Fatalf("no ERROR line with the owner and deadline: %v\n%s", line, log.String())
	}
	got := metricLines(t, m, "slipway_cleanup_unknown_count{")
	if len(got) != 1 || got[0] != `slipway_cleanup_unknown_count{environment="test",pool="agents"} 1` {
		t.Fatalf("alert metric: %q", got)
	}
	t.Run("alert fires", func(t *testing.T) { alertFires(t, got[0]) })

	// still held: retried, attempts go up, the deadline stays
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	open, _ = w.records.Open(ctx)
	if len(open) != 1 || open[0].Attempts != 2 || !open[0].Deadline.Equal(u.Deadline) || open[0].ID != u.ID {
		t.Fatalf("after a second failed attempt: %+v", open)
	}

	// the finalizer is cleared: the claim goes, the record closes
	if _, err := w.res(claimsGVR).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if w.exists(t, claimsGVR, name) {
		t.Fatal("the claim is still there")
	}
	if open, _ = w.records.Open(ctx); len(open) != 0 {
		t.Fatalf("open after the finalizer cleared: %+v", open)
	}
	if got := metricLines(t, m, "slipway_cleanup_unknown_count{"); len(got) != 1 || !strings.HasSuffix(got[0], "} 0") {
		t.Fatalf("alert metric after: %q", got)
	}
}

// alertFires evaluates deploy/prometheus/rules.yaml with promtool over
// sample (one line of /metrics, held for 3 minutes) and expects the alert
// SlipwayCleanupUnknown to fire with the sample's pool.
func alertFires(t *testing.T, sample string) {
	promtool := need.Binary(t, "promtool", "apt-get install prometheus (Debian's package ships promtool)")
	rules, err := filepath.Abs("../../../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	series, value, _ := strings.Cut(sample, " ")
	test := fmt.Sprintf(`rule_files:
  - %s
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: '%s'
        values: '%sx3'
    alert_rule_test:
      - eval_time: 2m
        alertname: SlipwayCleanupUnknown
        exp_alerts:
          - exp_labels: {severity: page, environment: test, pool: agents}
            exp_annotations:
              summary: "pool agents: 1 cleanups with an unknown outcome; the record names the owner and deadline"
              runbook_url: https://github.com/slipway-dev/slipway/blob/main/docs/operations.md#slipwaycleanupunknown
`, rules, series, value)
	file := filepath.Join(t.TempDir(), "incident_test.yaml")
	if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool: the alert does not fire on the exported sample: %v\n%s", err, out)
	}
}
