package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/reconcile"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

// A runtime on PostgreSQL (--db-file: the DSN never in argv) keeps its
// run manifests there, not in its state directory: the manifest of a
// claim is read back from the database, final once released, and no run
// is left open there.
func TestRuntimeRunsOnPostgres(t *testing.T) {
	dsn := pgtest.New(t)
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	dbFile := filepath.Join(dir, "db")
	for f, v := range map[string]string{tokenFile: restartToken, dbFile: dsn} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	rt := startRuntimeArgs(t, repo, filepath.Join(dir, "state"), tokenFile, "--db-file", dbFile)
	rt.waitWarm(t, 2)
	g, err := rt.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if err := rt.client.Release(ctx, g.RunID, runtimeapi.ReleaseBody{Token: g.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{runs.StateFile, reconcile.RecordsFile} {
		if _, err := os.Stat(filepath.Join(dir, "state", f)); !os.IsNotExist(err) {
			t.Errorf("a runtime on PostgreSQL wrote %s: %v", f, err)
		}
	}
	// the reconciler's records are in the database too (the runtime made
	// their table), and cleanup list reads them there
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var table *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('`+reconcile.RecordsSchema+`.cleanup')::text`).Scan(&table); err != nil || table == nil {
		t.Fatalf("the runtime's cleanup records in PostgreSQL: %v %v", table, err)
	}
	r := run(t, "", "cleanup", "list", "--db-file", dbFile, "-o", "json")
	var v reconcile.Remaining
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Remaining == nil {
		t.Fatalf("cleanup list --db-file: %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	st, err := runs.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := st.Get(ctx, g.RunID)
	if err != nil {
		t.Fatalf("the run's manifest in PostgreSQL: %v", err)
	}
	if !m.Status.Final() || m.SandboxID != g.SandboxID {
		t.Fatalf("manifest: status %q sandbox %q, want final on %s", m.Status, m.SandboxID, g.SandboxID)
	}
	if open, err := st.Open(ctx); err != nil || len(open) != 0 {
		t.Fatalf("open runs after release: %v %v", open, err)
	}
}
