package runs

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

func openTemp(t *testing.T) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenSQLiteRefusesNonFiles(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if _, err := OpenSQLite(context.Background(), p); !errors.Is(err, ErrInvalid) {
			t.Errorf("OpenSQLite(%q): err = %v, want ErrInvalid", p, err)
		}
	}
}

// The queries read only indexes: no scan of the runs table, whatever its size.
func TestQueryPlansUseCoveringIndexes(t *testing.T) {
	s, _ := openTemp(t)
	for _, q := range []runmanifest.Query{
		{Template: "t"}, {RunnerImage: "r"}, {RunnerBinary: "b"}, {NodeImage: "n"}, {Policy: "p"}, {SecretVersion: "s#1"},
		{Generation: "g"}, {Package: "a@1"}, {Node: "n"}, {RuntimeClass: "c"},
		{Package: "a@1", RunnerImage: "r"}, {Template: "t", Generation: "g"},
	} {
		stmt, args, err := sqliteQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		plan := queryPlan(t, s, stmt, args...)
		text := strings.Join(plan, "; ")
		t.Logf("%+v: %s", q, text)
		if strings.Contains(text, "SCAN") || !strings.Contains(text, "INDEX") {
			t.Errorf("Query(%+v) plan: %s", q, text)
		}
		// A package query: per artifact (template, runner image, control
		// plane), from the package index to that artifact's runs.
		if q.Package != "" {
			want := []string{"COMPOUND QUERY", "LEFT-MOST SUBQUERY"}
			for i, a := range packageArtifacts {
				if i > 0 {
					want = append(want, "UNION ALL")
				}
				want = append(want, "SEARCH p USING COVERING INDEX template_packages_by_package", "SEARCH r USING * "+a.sqliteIndex+" ")
			}
			if len(plan) != len(want) {
				t.Errorf("Query(%+v): want %d steps (%s): %s", q, len(want), strings.Join(want, "; "), text)
			}
			for i := range min(len(plan), len(want)) {
				pre, idx, _ := strings.Cut(want[i], "* ")
				if !strings.HasPrefix(plan[i], pre) || !strings.Contains(plan[i], idx) {
					t.Errorf("Query(%+v) step %d: %s, want %s", q, i, plan[i], want[i])
				}
			}
		}
		single := 0
		for _, v := range append(queryColumnValues(q), q.Package) {
			if v != "" {
				single++
			}
		}
		if single == 1 && strings.Contains(strings.ReplaceAll(text, "COVERING INDEX", ""), "INDEX") {
			t.Errorf("Query(%+v) reads the runs table: %s", q, text)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if _, err := s.w.ExecContext(ctx, `UPDATE schema_version SET version = ?`, SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenSQLite(ctx, path); !errors.Is(err, ErrSchema) {
		t.Errorf("OpenSQLite of a newer schema: err = %v, want ErrSchema", err)
	}
}

func TestPragmas(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	var mode string
	var sync int
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	var page int
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 || page != pageSize {
		t.Errorf("journal_mode %s, synchronous %d, page_size %d; want wal, 2 (FULL), %d", mode, sync, page, pageSize)
	}
	if _, err := s.r.ExecContext(ctx, `DELETE FROM runs`); err == nil {
		t.Error("the read connections can write")
	}
}

// The stored manifest is JSON text that SQLite's own JSON functions read
// (an operator's ad-hoc query, a later migration).
func TestStoredManifestIsJSONText(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	if err := s.Create(ctx, fullManifest("r-1")); err != nil {
		t.Fatal(err)
	}
	var typ, tpl string
	if err := s.r.QueryRowContext(ctx, `SELECT typeof(manifest), json_extract(manifest, '$.workspace_template_id') FROM runs`).Scan(&typ, &tpl); err != nil {
		t.Fatal(err)
	}
	if typ != "text" || tpl != fullManifest("").WorkspaceTemplateID {
		t.Errorf("stored manifest: %s, template %q", typ, tpl)
	}
}

// The SQLite store's Open reads the partial index of open runs alone; a
// file made before the index existed gets it when opened.
func TestOpenRunsIndexSQLite(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	for _, id := range []string{"r-2", "r-1", "r-3"} {
		if err := s.Create(ctx, &runmanifest.Manifest{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, "r-3", func(m *runmanifest.Manifest) error { m.Status = runmanifest.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(queryPlan(t, s, openStmt), "; "); strings.Contains(text, "SCAN") || !strings.Contains(text, "COVERING INDEX runs_open") {
		t.Errorf("Open plan: %s; want the covering partial index runs_open", text)
	}
	// a file without the index (as schema version 1 first made it)
	if _, err := s.w.ExecContext(ctx, `DROP INDEX runs_open`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var n int
	if err := s2.r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'runs_open'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("after reopening, runs_open: %d, %v", n, err)
	}
	if got, err := s2.Open(ctx); err != nil || !slices.Equal(got, []string{"r-1", "r-2"}) {
		t.Errorf("Open = %v, %v; want [r-1 r-2]", got, err)
	}
}

// queryPlan is the detail column of SQLite's EXPLAIN QUERY PLAN of stmt.
func queryPlan(t *testing.T, s *SQLite, stmt string, args ...any) []string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+stmt, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
