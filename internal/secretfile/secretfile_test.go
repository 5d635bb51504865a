package secretfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/secretfile"
)

func TestParseMounts(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    secretfile.Mounts
	}{
		{in: "", want: secretfile.Mounts{}},
		{in: "/var/run/db=slipway-db, /var/run/token/=slipway-runtime-token", want: secretfile.Mounts{"/var/run/db": "slipway-db", "/var/run/token": "slipway-runtime-token"}},
		{in: "var/run/db=slipway-db", err: `"var/run/db=slipway-db": want DIR=SECRET`},
		{in: "/var/run/db", err: `"/var/run/db": want DIR=SECRET`},
		{in: "/var/run/db=a/b", err: `want DIR=SECRET`},
		{in: "/a=x,/a=y", err: "/a is named twice (Secrets x and y)"},
	} {
		m, err := secretfile.ParseMounts(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseMounts(%q): %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(m) != len(tc.want) {
			t.Errorf("ParseMounts(%q) = %v, %v; want %v", tc.in, m, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if m[k] != v {
				t.Errorf("ParseMounts(%q)[%s] = %q, want %q", tc.in, k, m[k], v)
			}
		}
	}
}

// A file under a mount that is not there names its Secret and key, and is
// read once it comes; its content never shows in an error.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o700); err != nil {
		t.Fatal(err)
	}
	m := secretfile.Mounts{db: "slipway-db"}
	file := filepath.Join(db, "dsn")
	_, err := m.Read(file)
	if !errors.Is(err, secretfile.ErrMissing) {
		t.Fatalf("a missing file: %v, want ErrMissing", err)
	}
	if want := "file " + file + " (Secret slipway-db, key dsn) does not exist: the Secret is not created, or has no such key"; !strings.Contains(err.Error(), want) {
		t.Errorf("a missing file's error %q, want %q in it", err, want)
	}
	if err := os.WriteFile(file, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read(file); !errors.Is(err, secretfile.ErrMissing) || !strings.Contains(err.Error(), "(Secret slipway-db, key dsn) is empty") {
		t.Errorf("an empty file: %v", err)
	}
	if err := os.WriteFile(file, []byte("postgres://u:hunter2@db/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := m.Read(file); err != nil || s != "postgres://u:hunter2@db/x" {
		t.Errorf("Read = %q, %v", s, err)
	}
	// outside every mount: the file alone
	other := filepath.Join(dir, "token")
	if _, err := m.Read(other); err == nil || strings.Contains(err.Error(), "Secret") || !strings.Contains(err.Error(), other+" does not exist") {
		t.Errorf("a missing file outside the mounts: %v", err)
	}
	// a directory where the file should be: not ErrMissing, and no content
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Read(other); err == nil || errors.Is(err, secretfile.ErrMissing) {
		t.Errorf("a directory read as a file: %v", err)
	}
}
