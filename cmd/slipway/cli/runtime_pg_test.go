package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
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
	if _, err := os.Stat(filepath.Join(dir, "state", runs.StateFile)); !os.IsNotExist(err) {
		t.Errorf("a runtime on PostgreSQL wrote %s: %v", runs.StateFile, err)
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
