package runs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/testharness/pgtest"
)

func openPostgres(t *testing.T, dsn string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Handles opening a new database at once create its schema once.
func TestOpenPostgresConcurrently(t *testing.T) {
	dsn := pgtest.New(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			s, err := OpenPostgres(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := openPostgres(t, dsn)
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM slipway_runs.schema_version`).Scan(&n); err != nil || n != 1 {
		t.Errorf("schema_version rows: %d, %v; want 1", n, err)
	}
}

func TestOpenPostgresRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.New(t)
	s := openPostgres(t, dsn)
	if _, err := s.pool.Exec(ctx, `UPDATE slipway_runs.schema_version SET version = $1`, PostgresSchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenPostgres(ctx, dsn); !errors.Is(err, ErrSchema) {
		t.Errorf("OpenPostgres of a newer schema: err = %v, want ErrSchema", err)
	}
}

// A bad connection string is ErrInvalid; no error shows the password.
func TestOpenPostgresErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := OpenPostgres(ctx, "postgres://u:hunter2@127.0.0.1:notaport/db"); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad port: %v; want ErrInvalid without the password", err)
	}
	srv := pgtest.Shared(t)
	dsn := strings.Replace(srv.DSN("no_such_db"), "postgres@", "postgres:hunter2@", 1)
	_, err := OpenPostgres(ctx, dsn)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "/no_such_db") {
		t.Errorf("unknown database: %v; want an error naming the database, without the password", err)
	}
}

// The stored manifest is jsonb, for an operator's ad-hoc query; the tables
// live in their own schema.
func TestPostgresStoredManifestIsJSONB(t *testing.T) {
	ctx := context.Background()
	s := openPostgres(t, pgtest.New(t))
	if err := s.Create(ctx, fullManifest("r-1")); err != nil {
		t.Fatal(err)
	}
	var typ, tpl string
	if err := s.pool.QueryRow(ctx, `SELECT pg_typeof(manifest)::text, manifest->>'workspace_template_id' FROM slipway_runs.runs`).Scan(&typ, &tpl); err != nil {
		t.Fatal(err)
	}
	if typ != "jsonb" || tpl != fullManifest("").WorkspaceTemplateID {
		t.Errorf("stored manifest: %s, template %q", typ, tpl)
	}
	var public int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&public); err != nil || public != 0 {
		t.Errorf("tables in schema public: %d, %v; want none", public, err)
	}
}

// Run ids sort byte by byte on PostgreSQL too (as Go sorts, whatever the
// database's collation), and a limit keeps the first ones in that order.
func TestPostgresQueryOrder(t *testing.T) {
	ctx := context.Background()
	s := openPostgres(t, pgtest.New(t))
	ids := []string{"r-b", "R-a", "r-A", "r_1", "r-10", "r-9"}
	for _, id := range ids {
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: id, WorkspaceTemplateID: "tpl"}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Query(ctx, runmanifest.Query{Template: "tpl", Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"R-a", "r-10", "r-9", "r-A"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Query = %v, want %v", got, want)
	}
}
