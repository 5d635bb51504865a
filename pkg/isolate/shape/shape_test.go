package shape_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slipway-dev/slipway/pkg/isolate/shape"
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

// RefreshPod writes a pod's machine id: valid, read-only, different per
// pod, kept when the pod's init container runs again.
func TestRefreshPod(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		res, err := shape.RefreshPod(dir)
		if err != nil || !res.Done || res.Kind != shape.RefreshMachineID {
			t.Fatalf("RefreshPod(%s) = %+v, %v", dir, res, err)
		}
	}
	ida, _ := os.ReadFile(filepath.Join(a, shape.MachineIDFile))
	idb, _ := os.ReadFile(filepath.Join(b, shape.MachineIDFile))
	if !shape.ValidMachineID(ida) || !shape.ValidMachineID(idb) || string(ida) == string(idb) {
		t.Fatalf("machine ids %q %q: want two different valid ones", ida, idb)
	}
	if fi, err := os.Stat(filepath.Join(a, shape.MachineIDFile)); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	if res, err := shape.RefreshPod(a); err != nil || !res.Done {
		t.Fatal(res, err)
	}
	if again, _ := os.ReadFile(filepath.Join(a, shape.MachineIDFile)); string(again) != string(ida) {
		t.Errorf("a second run changed the pod's id: %q, was %q", again, ida)
	}
	// An invalid file (say an empty one) is replaced.
	if err := os.Remove(filepath.Join(b, shape.MachineIDFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, shape.MachineIDFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := shape.RefreshPod(b); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(b, shape.MachineIDFile)); !shape.ValidMachineID(got) {
		t.Errorf("empty machine id not replaced: %q", got)
	}
	if _, err := shape.RefreshPod(filepath.Join(a, "missing")); err == nil {
		t.Error("RefreshPod in a missing directory: no error")
	}
	for _, bad := range []string{"", "0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789ABCDEF\n", "0123456789abcdef0123456789abcde\n"} {
		if shape.ValidMachineID([]byte(bad)) {
			t.Errorf("ValidMachineID(%q) = true", bad)
		}
	}
}
