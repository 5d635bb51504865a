package shape_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/pkg/sandbox/shape"
)

func TestWorkdirAndEnv(t *testing.T) {
	for in, want := range map[string]string{"": shape.DefaultWorkdir, "/": shape.DefaultWorkdir, "work/": "/work", "/a/../b": "/b"} {
		if got := shape.Workdir(in); got != want {
			t.Errorf("Workdir(%q) = %q, want %q", in, got, want)
		}
	}
	env := shape.Env([]string{"A=1", "HOME=/home/user", "bad"}, "/workspace", map[string]string{"A": "2"})
	if env["A"] != "2" || env["HOME"] != "/home/user" || env["PATH"] != shape.DefaultPath || len(env) != 3 {
		t.Fatalf("env %v", env)
	}
	if env := shape.Env(nil, "/w", nil); env["HOME"] != "/w" {
		t.Fatalf("HOME default %v", env)
	}
}

// MountPoints adds what is missing and never changes what is there.
func TestMountPoints(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/machine-id"), []byte("kept\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := shape.MountPoints(dir, "/workspace", []string{"/run/x"}, []string{"/opt/f"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"proc", "dev", "tmp", "workspace", "run/x"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("/%s: %v", d, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "opt/f")); err != nil || fi.Size() != 0 {
		t.Errorf("/opt/f: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/machine-id")); string(b) != "kept\n" {
		t.Errorf("machine-id changed: %q", b)
	}
	if err := os.MkdirAll(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := shape.MountPoints(dir, "/workspace", nil, []string{"/x"}); err == nil {
		t.Fatal("a directory where a file mount point goes was accepted")
	}
}
