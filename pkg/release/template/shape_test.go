package template

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withTests is the minimal template with its tests replaced.
func withTests(tests string) string {
	i := strings.Index(minimal, "  tests:\n")
	return minimal[:i] + "  tests:\n" + tests
}

// A template's tests run in the shape the runtime gives a sandbox (package
// isolate/shape): after the refresh phase, on a read-only root with a
// private workspace. A test that would fail in every sandbox fails the
// build, naming the test and its line.
func TestBuildTestsFailAsInASandbox(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		tests    string
		contains []string
	}{
		"wants an empty machine-id": {`    - name: hello
      run: ["/bin/sh", "-c", "true"]
    - name: no-build-debris
      run: ["/bin/sh", "-c", "test ! -e /root/.netrc && test ! -s /etc/machine-id"]
`, []string{"template.yaml:17: test no-build-debris", "exit code 1", "fresh machine-id"}},
		"writes outside the workspace": {`    - name: writes-home
      run: ["/bin/sh", "-c", "touch /home/user/new"]
`, []string{"template.yaml:15: test writes-home", "exit code 1", "read-only"}},
	} {
		t.Run(name, func(t *testing.T) {
			file := e.writeSpec(t, withTests(tc.tests), minimalFiles)
			_, err := e.build(t, file)
			if !errors.Is(err, ErrTest) {
				t.Fatalf("err = %v, want %v", err, ErrTest)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error lacks %q: %v", c, err)
				}
			}
		})
	}
}

// What a sandbox sees, the tests see: a fresh machine id (the frozen
// image's stays empty), a writable workspace and /tmp, the template's user,
// and HOME; the tests' writes never reach the frozen tree.
func TestBuildTestsSeeTheSandboxShape(t *testing.T) {
	e := newEnv(t)
	file := e.writeSpec(t, withTests(`    - name: fresh-machine-id
      run: ["/bin/sh", "-c", "grep -Eq '^[0-9a-f]{32}$' /etc/machine-id"]
    - name: writable
      run: ["/bin/sh", "-c", "test $(id -u) = 1000 && touch /workspace/x /tmp/y && test \"$PWD\" = /workspace"]
    - name: one-sandbox
      run: ["/bin/sh", "-c", "test -e /workspace/x"]
`), minimalFiles)
	res, err := e.build(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 3 {
		t.Fatalf("tests %+v", res.Tests)
	}
	fi, err := os.Stat(filepath.Join(res.Rootfs, "etc/machine-id"))
	if err != nil || fi.Size() != 0 {
		t.Fatalf("frozen /etc/machine-id: %v, %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(res.Rootfs, "workspace/x")); err == nil {
		t.Fatal("a test's write reached the frozen tree")
	}
}

// The sample templates build, their tests passing as they will in every
// sandbox (here on the test's busybox base instead of the demo's).
func TestSampleTemplatesBuild(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"minimal", "agent-tools"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			must(t, os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "..", "templates", name))))
			file := filepath.Join(dir, "template.yaml")
			b, err := os.ReadFile(file)
			must(t, err)
			spec := strings.Replace(string(b), "base: 127.0.0.1:5000/slipway/base:busybox", "base: "+e.baseRef, 1)
			must(t, os.WriteFile(file, []byte(spec), 0o644))
			res, err := e.build(t, file)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tests) == 0 {
				t.Fatal("no tests ran")
			}
		})
	}
}
