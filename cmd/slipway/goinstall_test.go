package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/need"
)

// `go install github.com/slipway-dev/slipway/cmd/slipway@vX.Y.Z` works and
// the installed slipway reports that version: the module at HEAD is served
// as v0.99.N by a module proxy in a directory (the layout proxy.golang.org
// serves: .info, .mod and .zip; the zip from git archive, the nested
// modules left out as the go command requires), the dependencies come from
// the real Go module proxy, and the go command checks the module as it
// would a download (no replace directive, a well-formed zip).
func TestGoInstallAtVersion(t *testing.T) {
	need.Short(t, "a go install of the whole program from a module proxy")
	git := need.Binary(t, "git", "apt-get install git")
	goCmd := need.Binary(t, "go", "Go 1.26")
	const mod = "github.com/slipway-dev/slipway"
	// A version of its own each run: the go command keeps what it
	// downloaded; the test removes it again.
	ver := fmt.Sprintf("v0.99.%d", time.Now().UnixNano())
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(git, "-C", root, "rev-parse", "HEAD").CombinedOutput(); err != nil {
		need.Missing(t, "a git checkout of the module: %v %s", err, out)
	}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, mod, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"list":        ver + "\n",
		ver + ".info": `{"Version":"` + ver + `","Time":"2026-12-06T00:00:00Z"}`,
		ver + ".mod":  string(gomod),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// HEAD's tracked files, without the nested modules (each folder with a
	// go.mod of its own is another module).
	mods, err := exec.Command(git, "-C", root, "ls-files", "*go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-C", root, "archive", "--format=zip", "--prefix=" + mod + "@" + ver + "/", "-o", filepath.Join(dir, ver+".zip"), "HEAD", "--", "."}
	for _, m := range strings.Fields(string(mods)) {
		if m != "go.mod" {
			args = append(args, ":!"+filepath.Dir(m))
		}
	}
	if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	modcache, _ := exec.Command(goCmd, "env", "GOMODCACHE").Output()
	t.Cleanup(func() {
		mc := strings.TrimSpace(string(modcache))
		if mc == "" {
			return
		}
		extracted := filepath.Join(mc, mod+"@"+ver)
		_ = filepath.WalkDir(extracted, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755) // the go command leaves module trees read-only
			}
			return nil
		})
		_ = os.RemoveAll(extracted)
		dl, _ := filepath.Glob(filepath.Join(mc, "cache", "download", mod, "@v", ver+".*"))
		for _, f := range dl {
			_ = os.Remove(f)
		}
	})
	upstream, _ := exec.Command(goCmd, "env", "GOPROXY").Output()
	gobin := t.TempDir()
	install := exec.Command(goCmd, "install", mod+"/cmd/slipway@"+ver)
	install.Env = append(os.Environ(), "GOPROXY=file://"+proxy+","+strings.TrimSpace(string(upstream)), "GONOSUMDB="+mod, "GOBIN="+gobin,
		"GOFLAGS=", "CGO_ENABLED=0")
	install.Dir = t.TempDir() // outside the module: go install pkg@version ignores any go.mod
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/slipway@%s: %v\n%s", mod, ver, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "slipway"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), ver) || strings.Contains(string(out), "untagged") {
		t.Fatalf("installed slipway version: %v\n%s", err, out)
	}
	t.Logf("slipway version: %s", strings.TrimSpace(string(out)))
}
