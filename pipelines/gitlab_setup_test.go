package pipelines

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// TestGitLabSetupRelease runs the setup component (templates/setup.yml) and
// the lint component with gitlab-ci-local on the host shell executor, with
// no slipway on PATH, against a snapshot release of slipway served over
// 127.0.0.1 HTTP: slipway-setup checks checksums.txt's signature with the
// project's copy of the release key and the binary's sha256 against it, and
// slipway-lint, a stage later, runs the binary it installed. With another
// sha256, slipway-setup fails naming both and slipway-lint never runs.
func TestGitLabSetupRelease(t *testing.T) {
	need.Short(t, "gitlab-ci-local running the setup component against a release")
	node, index := gitlabCILocal(t)
	need.Binary(t, "rsync", "gitlab-ci-local copies the checkout with it (make deps installs it)")
	for _, tool := range []string{"curl", "openssl"} {
		need.Binary(t, tool, "the setup job uses it")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("releases are built for linux/amd64 and linux/arm64")
	}
	polyfill, err := filepath.Abs("gitlab/testdata/set-methods.mjs")
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	res, pub := snapshotRelease(t, files)
	srv := httptest.NewServer(http.FileServer(http.Dir(files)))
	t.Cleanup(srv.Close)

	project := func(sha string) string {
		dir := t.TempDir()
		if err := os.CopyFS(filepath.Join(dir, "pipelines", "gitlab", "templates"), os.DirFS("gitlab/templates")); err != nil {
			t.Fatal(err)
		}
		ci := "stages: [test]\ninclude:\n" +
			"  - local: pipelines/gitlab/templates/setup.yml\n    inputs:\n      version: " + res.Version +
			"\n      release-url: " + srv.URL + "/\n      key-file: release.pub\n      sha256: \"" + sha + "\"\n" +
			"  - local: pipelines/gitlab/templates/lint.yml\n    inputs:\n      paths: deploy\n"
		for f, body := range map[string]string{
			".gitlab-ci.yml":  ci,
			"release.pub":     string(pub),
			"deploy/web.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n    - name: web\n      image: nginx:1.27\n",
		} {
			os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "project"}} {
			if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		return dir
	}
	// PATH without any slipway: the job must use the one installed.
	var path []string
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(p, "slipway")); err != nil {
			path = append(path, p)
		}
	}
	run := func(dir string) (string, error) {
		cmd := exec.Command(node, "--import", polyfill, index, "--shell-executor-no-image", "--shell-isolation", "--color=false")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+strings.Join(path, string(os.PathListSeparator)), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	dir := project("")
	out, err := run(dir)
	// The tree has one mutable reference (nginx:1.27): lint finds it and
	// fails, which shows the installed slipway ran.
	if !strings.Contains(out, "PASS  slipway-setup") || !strings.Contains(out, "installed slipway "+res.Version) ||
		!strings.Contains(out, "FAIL  slipway-lint") || !strings.Contains(out, "nginx:1.27") {
		t.Fatalf("gitlab-ci-local: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".gitlab-ci-local", "artifacts", "slipway-lint", ".gitlab-ci-reports", "dotenv", "slipway.env")); string(b) != "FINDINGS=1\n" {
		t.Errorf("lint dotenv %q\n%s", b, out)
	}

	other := strings.Repeat("0", 64)
	out, err = run(project(other))
	if err == nil || !strings.Contains(out, "FAIL  slipway-setup") || !strings.Contains(out, "slipway-setup: checksum mismatch") ||
		!strings.Contains(out, "want "+other) || strings.Contains(out, "slipway-lint") && strings.Contains(out, "nginx:1.27") {
		t.Errorf("a wrong sha256: %v\n%s", err, out)
	}
}
