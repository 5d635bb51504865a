package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// seed copies a template's workspace into the pod's: folders, files with
// their permission bits but never setuid, symbolic links as links; a
// named pipe is left out and said so; an absent workspace seeds nothing.
func TestSeed(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "workspace"), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]fs.FileMode{"README": 0o644, "sub/run.sh": 0o755, "sub/deeper/secret": 0o600, "sub/suid": 0o4755}
	for name, mode := range files {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub/run.sh", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := seed([]string{src, dst}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "seeded 7 entries") || !strings.Contains(out.String(), "left out "+filepath.Join(src, "pipe")) {
		t.Errorf("output %q", out.String())
	}
	for name, mode := range files {
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dst, name))
		if want := mode.Perm(); fi.Mode() != want || string(b) != name+"\n" {
			t.Errorf("%s: mode %v %q, want %v", name, fi.Mode(), b, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "sub/run.sh" {
		t.Errorf("link: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "pipe")); err == nil {
		t.Error("the pipe was copied")
	}
	out.Reset()
	if err := seed([]string{filepath.Join(src, "missing"), dst}, &out); err != nil || !strings.HasPrefix(out.String(), "no ") {
		t.Errorf("absent source: %v %q", err, out.String())
	}
	// A second seed (the init container of a remade pod sandbox) leaves
	// the workspace, and what the workload changed in it, as it is.
	if err := os.WriteFile(filepath.Join(dst, "README"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := seed([]string{src, dst}, &out); err != nil || !strings.Contains(out.String(), "seeded already") {
		t.Errorf("second seed: %v %q", err, out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "README")); string(b) != "changed\n" {
		t.Errorf("the second seed overwrote the workspace: %q", b)
	}
}
