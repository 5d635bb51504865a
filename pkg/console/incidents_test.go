package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/control/incidents"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
)

// The incidents page merges the control plane's incidents with each
// runtime's own (its GET /v1/incidents, the report incidents.Runtime
// makes of its run store), each row labelled with its source; a kind is
// "read from" the sources that cover it; a server that serves none is
// said so, by name.
func TestIncidentsPageMergesRuntimes(t *testing.T) {
	ctx := context.Background()
	rs, err := runs.OpenSQLite(ctx, filepath.Join(t.TempDir(), runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	// A run whose credential expired while it was open, as the runtime
	// records it: the receipt's expiry before the run released its
	// resources.
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	m := &runmanifest.Manifest{RunID: "r-expired", AllocationAttempt: 1, SandboxID: "sb-1", Generation: "g-1", Pool: "agents", Tenant: "acme",
		SecretVersion: "vault://kv/agents/api-key#4",
		CredentialIssuances: []runmanifest.Receipt{{Issuer: "local-broker", SecretVersion: "vault://kv/agents/api-key#4",
			SHA256Fingerprint: "sha256:" + strings.Repeat("ab", 32), IssuedAt: t0, ExpiresAt: t0.Add(2 * time.Second)}},
		Lifecycle: runmanifest.Lifecycle{RequestReceived: t0, ClaimCreated: t0}}
	if err := rs.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := rs.Update(ctx, "r-expired", func(m *runmanifest.Manifest) error {
		m.Status, m.Lifecycle.ResourcesReleased = runmanifest.StatusCompleted, t0.Add(time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	withIncidents := startRuntime(t, runtime.WithIncidents(func(ctx context.Context) (*incidents.Report, error) { return incidents.Runtime(ctx, rs, nil) }))
	without := startRuntime(t)
	cp, ops := startControl(t)
	srv, err := console.New(cp, console.WithRuntime("a", withIncidents, runtimeToken), console.WithRuntime("b", without, runtimeToken))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	code, body := get(t, hs.URL+"/incidents", ops)
	if code != http.StatusOK {
		t.Fatalf("GET /incidents: %d\n%s", code, body)
	}
	for _, want := range []string{
		"This control plane serves no incidents",
		"<li>runtime a: read (GET /v1/incidents)</li>",
		"<li>runtime b: serves no incidents (a runtime older than GET /v1/incidents)",
		`<tr data-source="runtime a"><td>runtime a</td><td></td><td><a href="/runs/r-expired">r-expired</a></td><td>completed (expired)`,
		`<p id="incidents-open">Open (outcome not confirmed): 0</p>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the incidents page lacks %q:\n%s", want, body)
		}
	}
	section := func(kind string) string {
		_, s, _ := strings.Cut(body, `data-kind="`+kind+`"`)
		s, _, _ = strings.Cut(s, "</section>")
		return s
	}
	if s := section(string(incidents.CredentialExpiry)); !strings.Contains(s, "Read from: runtime a.") {
		t.Errorf("credential_expires is read from runtime a:\n%s", s)
	}
	if s := section(string(incidents.AgentHang)); !strings.Contains(s, "Not read") {
		t.Errorf("agent_hangs is read by no source here (the control plane serves none):\n%s", s)
	}
	if s := section(string(incidents.CleanupUnknown)); !strings.Contains(s, "Not read") || !strings.Contains(s, `<a href="/cleanup">the cleanup page</a>`) {
		t.Errorf("delete_times_out: runtime a runs no reconciler here; the page links the cleanup page:\n%s", s)
	}
}
