package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A database's password never travels in argv: --db refuses a DSN that
// holds one (without repeating it), and --db-file or $SLIPWAY_DB carry it.
func TestDBPasswordNeverInArgv(t *testing.T) {
	for _, dsn := range []string{
		"postgres://slipway:hunter2-secret@db.example:5432/slipway",
		"host=db.example user=slipway password=hunter2-secret dbname=slipway",
	} {
		r := run(t, "", "tenant", "token", "create", "acme", "--db", dsn)
		if r.code != 2 || !strings.Contains(r.stderr, "--db-file") {
			t.Errorf("--db with a password: want exit 2 naming --db-file, got %+v", r)
		}
		if strings.Contains(r.stderr+r.stdout, "hunter2") {
			t.Errorf("the password was echoed: %q", r.stderr)
		}
	}

	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "control.db")
	file := filepath.Join(dir, "dsn")
	if err := os.WriteFile(file, []byte(db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "", "tenant", "token", "create", "acme", "--db-file", file); r.code != 0 || r.stdout == "" {
		t.Fatalf("--db-file: %+v", r)
	}
	if r := run(t, "", "tenant", "token", "create", "acme", "--db-file", file, "--db", db); r.code != 2 || !strings.Contains(r.stderr, "twice") {
		t.Errorf("--db and --db-file: want a usage error, got %+v", r)
	}
	missing := filepath.Join(dir, "no-such-file")
	if r := run(t, "", "tenant", "token", "create", "acme", "--db-file", missing); r.code != 2 || !strings.Contains(r.stderr, "no-such-file") {
		t.Errorf("a missing --db-file: want it named, got %+v", r)
	}

	t.Setenv(envDB, db)
	r := run(t, "", "tenant", "token", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "acme") {
		t.Fatalf("$%s: %+v", envDB, r)
	}
	t.Setenv(envDB, "")
	if r := run(t, "", "tenant", "token", "list"); r.code != 2 || !strings.Contains(r.stderr, envDB) {
		t.Errorf("no database: want a usage error naming $%s, got %+v", envDB, r)
	}
}

// A server's $SLIPWAY_SECRET_MOUNTS that does not parse stops it at once
// with a usage error naming the variable and the pair at fault.
func TestSecretMountsRefused(t *testing.T) {
	t.Setenv(envSecretMounts, "var/run/db=slipway-db")
	for _, args := range [][]string{
		{"control", "serve", "--repo", "config.git", "--listen", "127.0.0.1:0", "--db-file", "/nonexistent/dsn"},
		{"runtime", "serve", "--repo", "config.git", "--state", t.TempDir(), "--listen", "127.0.0.1:0", "--token-file", "/nonexistent/token"},
	} {
		r := run(t, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "$"+envSecretMounts) || !strings.Contains(r.stderr, `"var/run/db=slipway-db"`) {
			t.Errorf("%s %s with a bad $%s: %+v", args[0], args[1], envSecretMounts, r)
		}
	}
}
