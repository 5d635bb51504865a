package pipelines

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// actionlintProject lays out a GitHub repository in a temporary folder (what
// actionlint needs to resolve ./pipelines/github/X): .git, the workflows under
// .github/workflows, and a copy of github/.
func actionlintProject(t *testing.T, workflows map[string][]byte) string {
	t.Helper()
	root := t.TempDir()
	wf := filepath.Join(root, ".github", "workflows")
	if err := os.MkdirAll(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range workflows {
		if err := os.WriteFile(filepath.Join(wf, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(root, "pipelines", "github"), os.DirFS("github")); err != nil {
		t.Fatal(err)
	}
	return root
}

func actionlint(t *testing.T) string {
	t.Helper()
	bin := need.Env(t, "ACTIONLINT", "make test and make test-short build bin/actionlint (pinned in tools/go.mod) and set it")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("ACTIONLINT=%s: %v", bin, err)
	}
	return bin
}

// TestActionlintExamples runs actionlint over the sample workflows, with the
// local actions they use resolved, so their inputs and outputs are checked
// against each action.yml.
func TestActionlintExamples(t *testing.T) {
	bin := actionlint(t)
	files, err := filepath.Glob("../examples/github/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample workflows: %v", err)
	}
	wfs := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		wfs[filepath.Base(f)] = b
	}
	root := actionlintProject(t, wfs)
	cmd := exec.Command(bin, "-no-color")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}

	// The same run refuses a workflow giving a local action an input it
	// does not have, or reading an output it does not set.
	bad := strings.Replace(string(wfs["release.yml"]), "          paths: deploy\n", "          pathz: deploy\n", 1)
	bad = strings.Replace(bad, "steps.build.outputs.ref }}\n", "steps.build.outputs.reff }}\n", 1)
	root = actionlintProject(t, map[string][]byte{"release.yml": []byte(bad)})
	cmd = exec.Command(bin, "-no-color")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `input "pathz" is not defined in action "Slipway lint"`) || !strings.Contains(string(out), `property "reff" is not defined`) {
		t.Fatalf("actionlint accepted a bad workflow: %v\n%s", err, out)
	}
}

// TestSetupInstall runs the setup action's installer with bash: a binary
// from a file:// URL is installed only when its sha256 matches and it reports
// the version asked for. The binary is a stand-in script that prints a
// version line like slipway's (building the real one here costs minutes).
func TestSetupInstall(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "slipway-linux-amd64")
	body := []byte("#!/bin/sh\necho 'slipway v1.2.3 go1.26.8 linux/amd64'\n")
	if err := os.WriteFile(bin, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	good := hex.EncodeToString(sum[:])
	install := func(version, url, sha string) (string, string, string, error) {
		t.Helper()
		run := t.TempDir()
		cmd := exec.Command("bash", "github/setup/install.sh")
		cmd.Env = append(os.Environ(),
			"SLIPWAY_VERSION="+version, "SLIPWAY_URL="+url, "SLIPWAY_SHA256="+sha,
			"SLIPWAY_INSTALL_DIR="+filepath.Join(run, "bin"),
			"GITHUB_OUTPUT="+filepath.Join(run, "output"), "GITHUB_PATH="+filepath.Join(run, "path"))
		out, err := cmd.CombinedOutput()
		return run, string(out), readOr(filepath.Join(run, "output")), err
	}

	run, out, outputs, err := install("v1.2.3", "file://"+bin, good)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	installed := filepath.Join(run, "bin", "slipway")
	if outputs != "path="+installed+"\nsha256="+good+"\n" || readOr(filepath.Join(run, "path")) != filepath.Join(run, "bin")+"\n" {
		t.Fatalf("outputs %q, path %q", outputs, readOr(filepath.Join(run, "path")))
	}
	if v, err := exec.Command(installed, "version").Output(); err != nil || !strings.HasPrefix(string(v), "slipway v1.2.3 ") {
		t.Fatalf("installed binary: %q %v", v, err)
	}

	for _, c := range []struct{ name, version, url, sha, want string }{
		{"wrong checksum", "v1.2.3", "file://" + bin, strings.Repeat("0", 64), "checksum mismatch for slipway v1.2.3: got sha256 " + good},
		{"url without checksum", "v1.2.3", "file://" + bin, "", "url needs sha256"},
		{"not a version", "latest", "file://" + bin, good, "version must be a release version"},
		{"other version", "v1.2.4", "file://" + bin, good, "the binary reports 'slipway v1.2.3', not slipway v1.2.4"},
		{"bad checksum", "v1.2.3", "file://" + bin, "sha256:" + good, "sha256 must be 64 lower-case hex digits"},
		{"missing file", "v1.2.3", "file://" + bin + ".absent", good, "download of file://"},
	} {
		run, out, outputs, err := install(c.version, c.url, c.sha)
		if err == nil || !strings.Contains(out, "::error title=slipway setup::"+c.want) {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
		if outputs != "" || readOr(filepath.Join(run, "path")) != "" {
			t.Errorf("%s: outputs written: %q", c.name, outputs)
		}
		if _, err := os.Stat(filepath.Join(run, "bin", "slipway")); err == nil {
			t.Errorf("%s: a binary was installed", c.name)
		}
	}
}

func readOr(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
