package reference

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsFresh fails when docs/cli no longer says what the command
// tree says: it writes the pages again into a temporary directory and
// compares them, naming each stale, missing or extra page.
func TestReferenceIsFresh(t *testing.T) {
	committed := filepath.Join("..", "..", "..", "..", "docs", "cli")
	fresh := t.TempDir()
	if err := Write(fresh); err != nil {
		t.Fatal(err)
	}
	want := pages(t, fresh)
	got := pages(t, committed)
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("docs/cli/%s is missing: run %s", name, Regenerate)
		case !bytes.Equal(g, w):
			t.Errorf("docs/cli/%s is stale: run %s", name, Regenerate)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s names no command: run %s", name, Regenerate)
		}
	}
}

func pages(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = b
	}
	return m
}
