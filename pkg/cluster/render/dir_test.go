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

	"github.com/slipway-dev/slipway/pkg/cluster/render"
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

// A pool's folder checked out alone (Argo CD's manifest-generate-paths)
// and opened as pools/<pool> renders the same bytes as the whole commit;
// nothing else of the tree is there, and the folders above it are listed.
func TestPoolDirRendersAsTheCommit(t *testing.T) {
	f := goldenTree(t)
	tree, rev, _ := commit(t, f)
	want, err := render.Pool(context.Background(), tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p, s := range f {
		rest, ok := strings.CutPrefix(p, "pools/agents/")
		if !ok {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(rest))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := render.OpenPoolDir(dir, "../x"); err == nil {
		t.Fatal("OpenPoolDir took a bad pool name")
	}
	dt, err := render.OpenPoolDir(dir, "agents")
	if err != nil {
		t.Fatal(err)
	}
	defer dt.Close()
	for _, tc := range []struct{ dir, want string }{{"", "pools"}, {"pools", "agents"}, {"clusters", ""}, {"pools/batch", ""}} {
		if names, err := dt.List(tc.dir); err != nil || strings.Join(names, " ") != tc.want {
			t.Errorf("List(%q) = %v, %v; want %q", tc.dir, names, err, tc.want)
		}
	}
	if names, err := dt.List("pools/agents"); err != nil || !strings.Contains(strings.Join(names, " "), "pool.yaml") {
		t.Errorf("List(pools/agents) = %v, %v", names, err)
	}
	for _, p := range []string{"pool.yaml", "README.md", "policies/verification.yaml", "pools/batch/pool.yaml"} {
		if _, err := dt.ReadFile(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%s) outside the pool's folder: err = %v", p, err)
		}
	}
	got, err := render.Pool(context.Background(), dt, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.YAML, want.YAML) {
		t.Fatalf("the pool folder's render differs from the commit's:\n%s", got.YAML)
	}
}
