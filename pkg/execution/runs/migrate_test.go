package runs

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
)

// schemaV1 is the schema version 1 wrote, as released: runner_digest held
// the runner IMAGE's digest.
var schemaV1 = []string{
	`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
	`INSERT INTO schema_version (version) VALUES (1)`,
	`CREATE TABLE runs (
		id                    INTEGER PRIMARY KEY,
		run_id                TEXT NOT NULL UNIQUE,
		status                TEXT NOT NULL,
		workspace_template_id TEXT NOT NULL,
		runner_digest         TEXT NOT NULL,
		node_image_id         TEXT NOT NULL,
		policy_revision       TEXT NOT NULL,
		generation            TEXT NOT NULL,
		manifest              TEXT NOT NULL
	)`,
	`CREATE INDEX runs_by_template ON runs (workspace_template_id, run_id)`,
	`CREATE INDEX runs_by_runner ON runs (runner_digest, run_id)`,
	`CREATE INDEX runs_by_node_image ON runs (node_image_id, run_id)`,
	`CREATE INDEX runs_by_policy ON runs (policy_revision, run_id)`,
	`CREATE INDEX runs_by_generation ON runs (generation, run_id)`,
	`CREATE TABLE templates (template_id TEXT PRIMARY KEY, packages_sha256 TEXT NOT NULL, package_count INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE template_packages (template_id TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL,
		PRIMARY KEY (template_id, name, version)) WITHOUT ROWID`,
	`CREATE INDEX template_packages_by_package ON template_packages (name, version, template_id)`,
}

// A manifest as version 1 stored it.
const manifestV1 = `{"run_id":"r-old","session_id":"","allocation_attempt":1,"sandbox_id":"sb-1","cluster":"local",` +
	`"namespace":"agents","node_id":"n","node_image_id":"","runtime_class":"","control_plane_digest":"",` +
	`"runner_digest":"sha256:2222222222222222222222222222222222222222222222222222222222222222",` +
	`"workspace_template_id":"sha256:3333333333333333333333333333333333333333333333333333333333333333",` +
	`"workspace_checkpoint_id":"","policy_revision":"","model_id":"","prompt_bundle_id":"",` +
	`"credential_issuances":[],"generation":"g-1","pool":"agents","tenant":"","warm":true,` +
	`"config_revision":"abc","status":"running","lifecycle":{}}`

// A version 1 file opens as version 2: runner_digest becomes
// runner_image_digest in the column, the index and every stored manifest,
// the new fields are empty, and the old run is found, updated and queried
// by its runner image.
func TestMigrateFromSchemaV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), StateFile)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range schemaV1 {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	img := "sha256:" + strings.Repeat("2", 64)
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (run_id, status, workspace_template_id, runner_digest, node_image_id,
		policy_revision, generation, manifest) VALUES ('r-old', 'running', ?, ?, '', '', 'g-1', ?)`,
		"sha256:"+strings.Repeat("3", 64), img, manifestV1); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("open a version 1 file: %v", err)
	}
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, SchemaVersion)
	}
	m, err := s.Get(ctx, "r-old")
	if err != nil {
		t.Fatalf("Get of a migrated manifest: %v", err)
	}
	if m.RunnerImageDigest != img || m.RunnerBinarySHA256 != "" || m.SecretVersion != "" || m.VerificationPolicyRevision != "" {
		t.Errorf("migrated manifest: %+v", m)
	}
	if got, err := s.Query(ctx, runmanifest.Query{RunnerImage: img}); err != nil || !slices.Equal(got, []string{"r-old"}) {
		t.Errorf("Query(runner image) = %v, %v", got, err)
	}
	if err := s.Update(ctx, "r-old", func(m *runmanifest.Manifest) error {
		m.RunnerBinarySHA256, m.SecretVersion = "sha256:"+strings.Repeat("7", 64), "vault://kv/agents/token#3"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Query(ctx, runmanifest.Query{SecretVersion: "vault://kv/agents/token#3"}); err != nil || !slices.Equal(got, []string{"r-old"}) {
		t.Errorf("Query(secret version) after an update = %v, %v", got, err)
	}
	// new runs go in beside the migrated one, through the same columns
	if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-new", RunnerImageDigest: img}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Query(ctx, runmanifest.Query{RunnerImage: img}); !slices.Equal(got, []string{"r-new", "r-old"}) {
		t.Errorf("Query(runner image) = %v", got)
	}
	plan := strings.Join(queryPlan(t, s, `SELECT run_id FROM runs WHERE runner_image_digest = ?`, img), "; ")
	if !strings.Contains(plan, "runs_by_runner_image") {
		t.Errorf("the migrated file has no runs_by_runner_image index: %s", plan)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// reopening a migrated file migrates nothing again
	s, err = OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "r-old"); err != nil {
		t.Error(err)
	}
}

// A version below 1 is no Slipway file.
func TestOpenRefusesUnknownOldSchema(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	if _, err := s.w.ExecContext(ctx, `UPDATE schema_version SET version = 0`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenSQLite(ctx, path); !errors.Is(err, ErrSchema) {
		t.Errorf("OpenSQLite of schema version 0: err = %v, want ErrSchema", err)
	}
}

// A store whose schema predates request keys (SQLite version 2,
// PostgreSQL version 1: the same tables without request_key) is migrated
// when it is opened: its runs keep everything, and new runs are found by
// their request key.
func TestMigrateAddsRequestKey(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct {
		name string
		old  []string // statements that take a new database back to the old version
	}{
		{"sqlite", []string{`DROP TABLE artifact_provenance`, `DROP INDEX runs_by_request_key`, `ALTER TABLE runs DROP COLUMN request_key`, `UPDATE schema_version SET version = 2`}},
		{"postgres", []string{`DROP TABLE slipway_runs.artifact_provenance`, `DROP INDEX slipway_runs.runs_by_control_plane`, `DROP INDEX slipway_runs.runs_by_node`, `DROP INDEX slipway_runs.runs_by_runtime_class`,
			`DROP INDEX slipway_runs.runs_by_request_key`, `ALTER TABLE slipway_runs.runs DROP COLUMN request_key`,
			`UPDATE slipway_runs.schema_version SET version = 1`}},
	} {
		t.Run(b.name, func(t *testing.T) {
			var open opener
			for _, be := range backends {
				if be.name == b.name {
					open = be.db(t)
				}
			}
			s := open(t)
			if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-old", Generation: "g-1"}); err != nil {
				t.Fatal(err)
			}
			for _, stmt := range b.old {
				var err error
				switch s := s.(type) {
				case *SQLite:
					_, err = s.w.ExecContext(ctx, stmt)
				case *Postgres:
					_, err = s.pool.Exec(ctx, stmt)
				}
				if err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			s.Close()
			s = open(t) // migrates
			if m, err := s.Get(ctx, "r-old"); err != nil || m.RequestKey != "" || m.Generation != "g-1" {
				t.Fatalf("old run after the migration: %+v, %v", m, err)
			}
			if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-new", Generation: "g-1", RequestKey: "job-7:1"}); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Query(ctx, runmanifest.Query{RequestKey: "job-7:1"}); err != nil || !slices.Equal(got, []string{"r-new"}) {
				t.Errorf("Query(request key) = %v, %v", got, err)
			}
			if got, err := s.Query(ctx, runmanifest.Query{Node: "n-1"}); err != nil || len(got) != 0 {
				t.Errorf("Query(node) after the migration = %v, %v", got, err)
			}
			if got, err := s.Query(ctx, runmanifest.Query{Generation: "g-1"}); err != nil || !slices.Equal(got, []string{"r-new", "r-old"}) {
				t.Errorf("Query(generation) = %v, %v", got, err)
			}
			if m, err := s.Get(ctx, "r-new"); err != nil || m.RequestKey != "job-7:1" {
				t.Errorf("Get(r-new) = %+v, %v", m, err)
			}
		})
	}
}

// A store from before builders were recorded (SQLite version 3,
// PostgreSQL version 4: no artifact_provenance) is migrated when it is
// opened: its runs and packages are kept, its artifacts' builders read as
// never recorded, and builders are recorded from then on.
func TestMigrateAddsBuilders(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct {
		name string
		old  []string
	}{
		{"sqlite", []string{`DROP TABLE artifact_provenance`, `UPDATE schema_version SET version = 3`}},
		{"postgres", []string{`DROP TABLE slipway_runs.artifact_provenance`, `UPDATE slipway_runs.schema_version SET version = 4`}},
	} {
		t.Run(b.name, func(t *testing.T) {
			var open opener
			for _, be := range backends {
				if be.name == b.name {
					open = be.db(t)
				}
			}
			s := open(t)
			tpl := "sha256:" + strings.Repeat("3", 64)
			if err := s.Create(ctx, &runmanifest.Manifest{RunID: "r-old", WorkspaceTemplateID: tpl}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordPackages(ctx, tpl, []runmanifest.Package{{Name: "openssl", Version: "3.0.7"}}); err != nil {
				t.Fatal(err)
			}
			for _, stmt := range b.old {
				var err error
				switch s := s.(type) {
				case *SQLite:
					_, err = s.w.ExecContext(ctx, stmt)
				case *Postgres:
					_, err = s.pool.Exec(ctx, stmt)
				}
				if err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			s.Close()
			s = open(t) // migrates
			if m, err := s.Get(ctx, "r-old"); err != nil || m.WorkspaceTemplateID != tpl {
				t.Fatalf("old run after the migration: %+v, %v", m, err)
			}
			if got, err := s.Query(ctx, runmanifest.Query{Package: "openssl@3.0.7"}); err != nil || !slices.Equal(got, []string{"r-old"}) {
				t.Errorf("the old run by its template's package after the migration: %v, %v", got, err)
			}
			if bs, recorded, err := s.Builders(ctx, tpl); err != nil || recorded || len(bs) != 0 {
				t.Errorf("builders of an artifact recorded before the migration: %v recorded %v, %v; want none recorded", bs, recorded, err)
			}
			want := runmanifest.Builder{ID: "https://ci.example/builder", Attestation: "sha256:" + strings.Repeat("9", 64)}
			if _, err := s.RecordBuilders(ctx, tpl, []runmanifest.Builder{want}); err != nil {
				t.Fatal(err)
			}
			if bs, recorded, err := s.Builders(ctx, tpl); err != nil || !recorded || len(bs) != 1 || bs[0] != want {
				t.Errorf("builders after the migration: %v recorded %v, %v", bs, recorded, err)
			}
		})
	}
}
