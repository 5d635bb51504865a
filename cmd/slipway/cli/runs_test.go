package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
)

func TestRunsShowQuery(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	s, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := "sha256:" + strings.Repeat("3", 64)
	if _, err := s.RecordPackages(ctx, tmpl, []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-123", AllocationAttempt: 1, SandboxID: "sb-1", WorkspaceTemplateID: tmpl,
		RunnerImageDigest: "sha256:" + strings.Repeat("2", 64), RunnerBinarySHA256: "sha256:" + strings.Repeat("7", 64),
		SecretVersion: "vault://kv/agents/token#3", Generation: "g-1", Pool: "agents", Warm: true,
		Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0.Add(250 * time.Millisecond), Ready: t0.Add(300 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r := run(t, "", "runs", "show", "r-123", "--state", state)
	var m map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || m["run_id"] != "r-123" || m["workspace_template_id"] != tmpl || m["allocation_attempt"] != 1.0 {
		t.Fatalf("runs show: %+v", r)
	}
	if _, ok := m["credential_issuances"]; !ok {
		t.Errorf("credential_issuances missing from %s", r.stdout)
	}
	if r := run(t, "", "runs", "query", "--package", "openssl@3.0.7", "--state", state); r.code != 0 || strings.TrimSpace(r.stdout) != "r-123" {
		t.Fatalf("query by package: %+v", r)
	}
	if r := run(t, "", "runs", "query", "--template", tmpl, "--state", state, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"r-123"`) {
		t.Fatalf("query by template: %+v", r)
	}
	img, bin := "sha256:"+strings.Repeat("2", 64), "sha256:"+strings.Repeat("7", 64)
	for _, args := range [][]string{{"--runner-image", img}, {"--runner", img}, {"--runner-binary", bin},
		{"--secret-version", "vault://kv/agents/token#3"}, {"--runner-image", img, "--runner-binary", bin}} {
		if r := run(t, "", append([]string{"runs", "query", "--state", state}, args...)...); r.code != 0 || strings.TrimSpace(r.stdout) != "r-123" {
			t.Fatalf("query %v: %+v", args, r)
		}
	}
	// the image digest is no binary sha256, and #4 is not #3
	for _, args := range [][]string{{"--runner-binary", img}, {"--runner-image", bin}, {"--secret-version", "vault://kv/agents/token#4"},
		{"--secret-version", "vault://kv/agents/token"}} {
		if r := run(t, "", append([]string{"runs", "query", "--state", state}, args...)...); r.code != 0 || r.stdout != "" {
			t.Fatalf("query %v: %+v", args, r)
		}
	}
	if r := run(t, "", "runs", "query", "--runner", img, "--runner-image", img, "--state", state); r.code != 2 {
		t.Fatalf("--runner with --runner-image: %+v", r)
	}
	if r := run(t, "", "runs", "query", "--package", "zlib@1.0", "--state", state); r.code != 0 || r.stdout != "" {
		t.Fatalf("query with no match: %+v", r)
	}
	if r := run(t, "", "runs", "show", "r-404", "--state", state); r.code != 1 {
		t.Fatalf("unknown run: %+v", r)
	}
	r = run(t, "", "runs", "show", "r-123", "--state", state, "--lifecycle")
	if r.code != 0 || !strings.Contains(r.stdout, "run r-123: warm hit, allocation attempt 1, sandbox sb-1") ||
		!strings.Contains(r.stdout, "claim_created        2026-11-29T12:00:00.25Z  +250ms  <- longest") ||
		!strings.Contains(r.stdout, "total                300ms") || strings.Contains(r.stdout, "first_output") {
		t.Fatalf("runs show --lifecycle: %+v", r)
	}
	if r := run(t, "", "runs", "show", "r-123", "--state", state, "--lifecycle", "--egress"); r.code != 2 {
		t.Fatalf("--lifecycle with --egress: %+v", r)
	}
	if r := run(t, "", "runs", "query", "--state", state); r.code != 2 {
		t.Fatalf("query without a criterion: %+v", r)
	}
	if r := run(t, "", "runs", "show", "r-123", "--state", t.TempDir()); r.code != 2 || !strings.Contains(r.stderr, "runs.db") {
		t.Fatalf("state without runs: %+v", r)
	}
}

func TestRunsShowEgress(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	s, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := &runmanifest.Manifest{RunID: "r-eg", AllocationAttempt: 1, Pool: "agents"}
	m.AddEgress(runmanifest.EgressAttempt{Time: t0, Method: "GET", Destination: "192.0.2.2:8080", Address: "192.0.2.2", Allowed: true, Rule: "192.0.2.2/32:8080", BytesOut: 80, BytesIn: 140},
		runmanifest.EgressAttempt{Time: t0.Add(time.Second), Method: "CONNECT", Destination: "169.254.169.254:443", Address: "169.254.169.254",
			Reason: "169.254.169.254 is link-local (cloud metadata): never allowed"})
	if err := s.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-none", AllocationAttempt: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r := run(t, "", "runs", "show", "r-eg", "--state", state, "--egress")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") ||
		strings.Join(strings.Fields(lines[1]), " ") != "2026-11-29T12:00:00Z GET 192.0.2.2:8080 allowed 192.0.2.2/32:8080 80 140" ||
		!strings.Contains(strings.Join(strings.Fields(lines[2]), " "), "CONNECT 169.254.169.254:443 denied 169.254.169.254 is link-local") {
		t.Fatalf("runs show --egress: %+v", r)
	}
	r = run(t, "", "runs", "show", "r-eg", "--state", state, "--egress", "-o", "json")
	var out struct {
		RunID  string                      `json:"run_id"`
		Egress []runmanifest.EgressAttempt `json:"egress"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.RunID != "r-eg" || len(out.Egress) != 2 || out.Egress[1].Allowed {
		t.Fatalf("runs show --egress -o json: %+v", r)
	}
	if r := run(t, "", "runs", "show", "r-eg", "--state", state); r.code != 0 || !strings.Contains(r.stdout, `"destination": "169.254.169.254:443"`) {
		t.Fatalf("runs show: the manifest lacks its egress: %+v", r)
	}
	if r := run(t, "", "runs", "show", "r-none", "--state", state, "--egress"); r.code != 0 || !strings.Contains(r.stdout, "run r-none made no egress attempts") {
		t.Fatalf("runs show --egress of a run without any: %+v", r)
	}
}

// writeCounter counts Write calls.
type writeCounter struct{ n int }

func (w *writeCounter) Write(p []byte) (int, error) { w.n++; return len(p), nil }

// The table is one write: a consumer that indents each write (the demo)
// sees whole lines.
func TestPrintEgressOneWrite(t *testing.T) {
	m := &runmanifest.Manifest{RunID: "r-1"}
	m.AddEgress(runmanifest.EgressAttempt{Method: "GET", Destination: "192.0.2.2:80", Allowed: true, Rule: "192.0.2.2:80"},
		runmanifest.EgressAttempt{Method: "GET", Destination: "192.0.2.2:81", Reason: "on no allow-list entry"})
	var w writeCounter
	if err := printEgress(&w, m); err != nil || w.n != 1 {
		t.Fatalf("%d writes, %v", w.n, err)
	}
}

// runs related lists, per identity of a run, the other runs that shared
// it; what the run did not record is said so, not matched.
func TestRunsRelated(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	s, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*runmanifest.Manifest{
		{RunID: "r-1", NodeID: "n-a", WorkspaceTemplateID: "tpl-1", RuntimeClass: "gvisor", PolicyRevision: "p-1"},
		{RunID: "r-2", NodeID: "n-a", WorkspaceTemplateID: "tpl-2", RuntimeClass: "gvisor", PolicyRevision: "p-2"},
		{RunID: "r-3", NodeID: "n-b", WorkspaceTemplateID: "tpl-1", RuntimeClass: "runc", PolicyRevision: "p-1"},
		{RunID: "r-4", NodeID: "n-a", WorkspaceTemplateID: "tpl-1", RuntimeClass: "runc"},
		{RunID: "r-5", NodeID: "n-c"},
	} {
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	r := run(t, "", "runs", "related", "r-1", "--state", state)
	want := "node n-a: 2 other runs: r-2 r-4\ntemplate tpl-1: 2 other runs: r-3 r-4\nruntime_class gvisor: 1 other runs: r-2\npolicy_revision p-1: 1 other runs: r-3\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("runs related r-1: %+v\nwant %s", r, want)
	}
	r = run(t, "", "runs", "related", "r-5", "--state", state, "-o", "json")
	var got struct {
		Run     string             `json:"run"`
		Related []runs.RelatedRuns `json:"related"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Run != "r-5" || len(got.Related) != 4 ||
		got.Related[0].Value != "n-c" || len(got.Related[0].Runs) != 0 || got.Related[1].Value != "" || len(got.Related[1].Runs) != 0 {
		t.Fatalf("runs related r-5: %+v", r)
	}
	if r := run(t, "", "runs", "related", "r-1", "--state", state, "--limit", "1"); r.code != 0 || !strings.Contains(r.stdout, "node n-a: 1 other runs (and more): r-2\n") {
		t.Fatalf("with a limit: %+v", r)
	}
	if r := run(t, "", "runs", "related", "r-404", "--state", state); r.code != 1 {
		t.Fatalf("unknown run: %+v", r)
	}
	if r := run(t, "", "runs", "query", "--node", "n-a", "--runtime-class", "runc", "--state", state); r.code != 0 || strings.TrimSpace(r.stdout) != "r-4" {
		t.Fatalf("query by node and runtime class: %+v", r)
	}
}

// runs show --fence: the owning attempt, the fenced ones, each
// credential's standing, and the answer; a live credential that is not the
// current one is called out.
func TestRunsShowFence(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	s, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	fp := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	revoked := now.Add(-time.Minute)
	rc := func(c string, rev *time.Time) runmanifest.Receipt {
		return runmanifest.Receipt{Issuer: "slipway", SecretVersion: "vault://kv/a#1", SHA256Fingerprint: fp(c), IssuedAt: now.Add(-2 * time.Minute), ExpiresAt: now.Add(time.Hour), RevokedAt: rev}
	}
	for _, m := range []*runmanifest.Manifest{
		{RunID: "r-moved", Status: runmanifest.StatusRunning, AllocationAttempt: 2, SandboxID: "sb-2",
			Fences:              []runmanifest.Fence{{AllocationAttempt: 1, SandboxID: "sb-1", FencedAt: revoked, Reason: "missed 3 heartbeats"}},
			CredentialIssuances: []runmanifest.Receipt{rc("a", &revoked), rc("b", nil)}},
		{RunID: "r-leak", Status: runmanifest.StatusReleased, AllocationAttempt: 1, SandboxID: "sb-3",
			CredentialIssuances: []runmanifest.Receipt{rc("c", nil)}},
	} {
		if err := s.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	r := run(t, "", "runs", "show", "r-moved", "--state", state, "--fence")
	for _, want := range []string{"run r-moved (running): owned by allocation attempt 2, sandbox sb-2",
		"fenced: attempt 1, sandbox sb-1", "missed 3 heartbeats", fp("a") + " issued", ": revoked at", fp("b") + " issued",
		": current", "? no: 1 earlier attempt(s) fenced"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("runs show --fence r-moved: no %q in %+v", want, r)
		}
	}
	r = run(t, "", "runs", "show", "r-leak", "--state", state, "--fence", "-o", "json")
	var v runmanifest.Fencing
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || len(v.Credentials) != 1 || v.Credentials[0].Standing != "NOT REVOKED" ||
		!strings.Contains(v.Verdict, "not revoked") || !strings.Contains(v.Verdict, "released") {
		t.Fatalf("runs show --fence r-leak: %+v", r)
	}
}
