package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

type brokerCreds struct{ b *runtime.Broker }

func (c brokerCreds) Live() []reconcile.Credential {
	var out []reconcile.Credential
	for _, l := range c.b.Live() {
		out = append(out, reconcile.Credential{Fingerprint: l.Fingerprint, RunID: l.RunID, ExpiresAt: l.ExpiresAt})
	}
	return out
}

func (c brokerCreds) Revoke(fp string) { c.b.Revoke(fp) }

// TestCleanupList: slipway cleanup list reads the reconciler's records
// while the reconciler holds them open, in text and JSON, in under a
// second: what remains (a credential waiting out its grace) and what was
// done (a credential of a released run revoked).
func TestCleanupList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	be, err := local.New(filepath.Join(dir, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	st, err := runs.OpenSQLite(ctx, filepath.Join(dir, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := reconcile.OpenRecords(ctx, filepath.Join(dir, reconcile.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if err := st.Create(ctx, &runmanifest.Manifest{RunID: "r-done", Pool: "agents", Status: runmanifest.StatusGranted}); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "r-done", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusReleased; return nil }); err != nil {
		t.Fatal(err)
	}
	b, _ := runtime.NewBroker(runtime.LocalIssuer, time.Hour)
	_, done, _ := b.Issue("r-done", "vault://kv/a#1")
	_, ghost, _ := b.Issue("r-ghost", "vault://kv/a#1")
	r, err := reconcile.New(reconcile.Config{Backend: be, Runs: st, Records: rs, Owner: "host/127.0.0.1:7070", Credentials: brokerCreds{b}, Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	res := run(t, "", "cleanup", "list", "--state", dir)
	t.Logf("cleanup list took %s", time.Since(start)) // a figure, not an assertion
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	t.Logf("slipway cleanup list --state DIR\n%s", res.stdout)
	for _, want := range []string{"REMAINING: 1", "pending", ghost.SHA256Fingerprint, "r-ghost", "RECENT: 1", "done", done.SHA256Fingerprint, "r-done", "revoked"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, res.stdout)
		}
	}
	res = run(t, "", "cleanup", "list", "--state", dir, "-o", "json")
	var v reconcile.Remaining
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if len(v.Remaining) != 1 || v.Remaining[0].State != reconcile.StatePending || v.Remaining[0].Owner != "host/127.0.0.1:7070" ||
		len(v.Recent) != 1 || v.Recent[0].Kind != reconcile.KindCredential || v.Recent[0].State != reconcile.StateDone {
		t.Errorf("json: %+v", v)
	}
	if res := run(t, "", "cleanup", "list", "--state", t.TempDir()); res.code == 0 || !strings.Contains(res.stderr, reconcile.RecordsFile) {
		t.Errorf("a state directory without records: exit %d, %s", res.code, res.stderr)
	}
}
