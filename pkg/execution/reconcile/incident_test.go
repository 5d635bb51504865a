package reconcile

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/telemetry"

	"github.com/slipway-dev/slipway/testharness/need"
)

// scrape returns the metric lines of m that start with prefix.
func scrape(t *testing.T, m *telemetry.Metrics, prefix string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestIncidentDeleteTimesOut is seed incident 6: a delete that times out.
// The delete cannot be made to hang for real on the local backend (its
// kill and removal do not block), so the failpoint reconcile.delete.hang
// (the style of pkg/control's SLIPWAY_TEST_FAILPOINT) holds it until the
// action timeout. The evidence: a cleanup-unknown record with the owner,
// a deadline, the attempts and the last error; an ERROR log line; the
// alert metric cleanup_unknown_count{pool}=1 and orphan_resource_count;
// retried each pass (attempts go up, the deadline stays); and once the
// fault is gone a later pass deletes it and the record is resolved, kept.
func TestIncidentDeleteTimesOut(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	s := w.create(t, "agents", "g-1", "r-done")
	w.run(t, "r-done", "agents", s.ID, 1, runmanifest.StatusCompleted)
	m, err := telemetry.NewMetrics(telemetry.WithEnvironment("test"))
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	r := newReconciler(t, w, nil, nil, &log, func(c *Config) {
		c.ActionTimeout = 300 * time.Millisecond
		c.UnknownDeadline = time.Hour
		c.Failpoint = FailpointDeleteHang
		c.Metrics = m
	})

	start := time.Now()
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unknown != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("pass 1: %+v in %s", rep, time.Since(start))
	}
	open, err := w.records.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 {
		t.Fatalf("open records: %+v", open)
	}
	u := open[0]
	if u.State != StateUnknown || u.Kind != KindLeaseTerminal || u.Resource != s.ID || u.RunID != "r-done" || u.LeaseVersion != "r-done@1" ||
		u.Owner != "test-host/127.0.0.1:7070" || u.Attempts != 1 || u.Deadline.Before(time.Now().Add(50*time.Minute)) ||
		!strings.Contains(u.LastError, "no answer within 300ms") {
		t.Fatalf("unknown record: %+v", u)
	}
	var line map[string]any
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `"cleanup unknown"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["level"] != "ERROR" || line["resource"] != s.ID || line["owner"] != "test-host/127.0.0.1:7070" || line["deadline"] == nil || line["attempts"] != float64(1) {
		t.Fatalf("no ERROR line with the owner, deadline and attempts: %v\n%s", line, log.String())
	}
	if got := scrape(t, m, "slipway_cleanup_unknown_count"); !strings.Contains(got, `slipway_cleanup_unknown_count{environment="test",pool="agents"} 1`) {
		t.Fatalf("alert metric: %q", got)
	}
	if got := scrape(t, m, "slipway_orphan_resource_count"); !strings.Contains(got, `pool="agents"} 1`) {
		t.Fatalf("orphan metric: %q", got)
	}
	if w.sandboxes(t)[s.ID] == nil {
		t.Fatal("the sandbox whose delete timed out is not there any more: the fault was not real")
	}

	// still hanging: retried, attempts go up, the deadline stays
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	open, _ = w.records.Open(ctx)
	if len(open) != 1 || open[0].Attempts != 2 || !open[0].Deadline.Equal(u.Deadline) || open[0].ID != u.ID {
		t.Fatalf("after a second failed attempt: %+v", open)
	}

	// the fault ends: the next pass deletes it and resolves the record
	fp := ""
	r.failpoint.Store(&fp)
	rep, err = r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cleaned != 1 {
		t.Fatalf("pass 3: %+v", rep)
	}
	gone(t, w, s.ID)
	if open, _ = w.records.Open(ctx); len(open) != 0 {
		t.Fatalf("open after resolution: %+v", open)
	}
	all := recordsOf(t, w.records)
	if len(all) != 1 || all[0].State != StateResolved || all[0].Attempts != 3 || all[0].LastError == "" {
		t.Fatalf("resolved record: %+v", all)
	}
	if got := scrape(t, m, "slipway_cleanup_unknown_count"); !strings.Contains(got, `pool="agents"} 0`) {
		t.Fatalf("alert metric after resolution: %q", got)
	}
}

// TestDeleteFailsForReal: a delete that fails for real (a file of the
// sandbox's workspace made immutable, so its folder cannot be removed)
// leaves the deletion half done; the record is cleanup unknown, and once
// the file can go a later pass finishes the deletion and resolves it.
func TestDeleteFailsForReal(t *testing.T) {
	need.Binary(t, "chattr", "it makes a file immutable (apt-get install e2fsprogs; make deps)")
	w := newWorld(t)
	ctx := context.Background()
	s := w.create(t, "agents", "g-1", "r-done")
	w.run(t, "r-done", "agents", s.ID, 1, runmanifest.StatusReleased)
	pin := filepath.Join(w.dir, "sandboxes", "sandboxes", s.ID, "pinned")
	if out, err := exec.Command("sh", "-c", "touch "+pin+" && chattr +i "+pin).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	trashed := filepath.Join(w.dir, "sandboxes", "sandboxes", ".deleting-"+s.ID, "pinned")
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", pin).Run(); _ = exec.Command("chattr", "-i", trashed).Run() })
	r := newReconciler(t, w, nil, nil, &syncBuffer{}, nil)
	rep, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := w.records.Open(ctx)
	if rep.Unknown != 1 || len(open) != 1 || open[0].State != StateUnknown || open[0].Kind != KindLeaseTerminal || open[0].LastError == "" {
		t.Fatalf("after the failed delete: %+v %+v", rep, open)
	}
	// the pass after: still failing, still tracked under the same record
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	open, _ = w.records.Open(ctx)
	if len(open) != 1 || open[0].Attempts != 2 || open[0].Kind != KindLeaseTerminal {
		t.Fatalf("second attempt: %+v", open)
	}
	if out, err := exec.Command("chattr", "-i", trashed).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, w, s.ID)
	all := recordsOf(t, w.records)
	if len(all) != 1 || all[0].State != StateResolved || all[0].Attempts != 3 {
		t.Fatalf("records: %+v", all)
	}
}
