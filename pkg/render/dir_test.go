package render_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/render"
)

// A checkout in a directory renders the same bytes as the commit it holds,
// and its reads stay inside it.
func TestDirTreeRendersAsTheCommit(t *testing.T) {
	f := goldenTree(t)
	tree, rev, _ := commit(t, f)
	want, err := render.Pool(context.Background(), tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p, s := range f {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	dt, err := render.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dt.Close()
	if _, err := dt.ReadFile("escape.yaml"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a link out of the checkout: err = %v", err)
	}
	if _, err := dt.ReadFile("pools/agents"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a folder: err = %v", err)
	}
	if names, err := dt.List(""); err != nil || strings.Contains(strings.Join(names, " "), ".git") {
		t.Fatalf("root: %v %v", names, err)
	}
	if err := os.Remove(filepath.Join(dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	got, err := render.Pool(context.Background(), dt, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.YAML, want.YAML) {
		t.Fatalf("directory render differs from the commit's:\n%s", got.YAML)
	}
}
