package atomicfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/atomicfile"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc.yaml")
	for _, body := range []string{"one\n", "two\n"} {
		if err := atomicfile.Write(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != body {
			t.Fatalf("read %q, %v; want %q", b, err, body)
		}
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestWriteNamesThePathOnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing", "doc.yaml")
	err := atomicfile.Write(p, []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v", err)
	}
}
