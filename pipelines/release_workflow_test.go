package pipelines

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/need"
)

// TestActReleaseWorkflow runs .github/workflows/release.yml with nektos/act
// on the host (-P ubuntu-latest=-self-hosted) for a push of the tag v9.9.9
// in a clone of this repository's HEAD (the workflow as in the work tree),
// against an in-process registry, for the host's platform
// (SLIPWAY_RELEASE_PLATFORMS) and with the files published to a folder
// (SLIPWAY_RELEASE_FILES_DIR): make release builds, signs and pushes; the
// three images are tagged v9.9.9 in the registry; the published
// checksums.txt's signature verifies with the release key and lists the
// binary published beside it. Then a push of a tag that is not at HEAD is
// refused: the workflow fails, and no tag and no files are published.
func TestActReleaseWorkflow(t *testing.T) {
	need.Short(t, "act running the release workflow (make release) end to end")
	act := need.Env(t, "ACT", "`make bin/act` builds nektos/act (pinned in tools/go.mod) and make test sets it")
	if _, err := os.Stat(act); err != nil {
		need.Missing(t, "ACT=%s: %v: run `make bin/act`", act, err)
	}
	if runtime.GOOS != "linux" {
		t.Skip("releases are built on linux")
	}
	const password = "release-pw-3c9a"
	priv, pub, err := sign.GenerateKeys([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")

	// A clone of HEAD with this work tree's workflow, committed and tagged.
	project := filepath.Join(t.TempDir(), "slipway")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", project, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", "..", project).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	wf, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(project, ".github", "workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".github", "workflows", "release.yml"), wf, 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "--allow-empty", "-m", "release workflow")
	git("tag", "v9.9.9")

	files := t.TempDir()
	goEnv := func(k string) string {
		out, _ := exec.Command("go", "env", k).Output()
		return strings.TrimSpace(string(out))
	}
	run := func(tag string) (string, error) {
		t.Helper()
		event := filepath.Join(t.TempDir(), "event.json")
		if err := os.WriteFile(event, []byte(`{"ref":"refs/tags/`+tag+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(act, "push", "-e", event, "-W", ".github/workflows/release.yml", "-P", "ubuntu-latest=-self-hosted",
			"-s", "SLIPWAY_SIGNING_KEY", "-s", "SLIPWAY_KEY_PASSWORD",
			"--var", "SLIPWAY_RELEASE_REGISTRY="+host+"/slipway-dev",
			"--var", "SLIPWAY_RELEASE_PLATFORMS=linux/"+runtime.GOARCH,
			"--var", "SLIPWAY_RELEASE_FILES_DIR="+files)
		cmd.Dir = project
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "COSIGN_PASSWORD=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		// Go's caches as the tests have them: the release links rather
		// than compiles (make release-cache).
		cmd.Env = append(cmd.Env, "GOCACHE="+goEnv("GOCACHE"), "GOMODCACHE="+goEnv("GOMODCACHE"),
			"SLIPWAY_SIGNING_KEY="+string(priv), "SLIPWAY_KEY_PASSWORD="+password)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), password) {
			t.Errorf("the key's password is in act's log")
		}
		return string(out), err
	}

	out, err := run("v9.9.9")
	if err != nil {
		t.Fatalf("act push v9.9.9: %v\n%s", err, out)
	}
	for _, prog := range selfrelease.Programs {
		ref, _ := name.ParseReference(host + "/slipway-dev/" + prog + ":v9.9.9")
		idx, err := remote.Index(ref)
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.Architecture != runtime.GOARCH {
			t.Errorf("%s: index %+v %v", ref, m, err)
		}
	}
	dir := filepath.Join(files, "v9.9.9")
	checksums, err := os.ReadFile(filepath.Join(dir, selfrelease.ChecksumsFile))
	if err != nil {
		t.Fatalf("published files: %v\n%s", err, out)
	}
	sig, _ := os.ReadFile(filepath.Join(dir, selfrelease.ChecksumsFile+".sig"))
	file := "slipway-linux-" + runtime.GOARCH
	bin, _ := os.ReadFile(filepath.Join(dir, file))
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := selfrelease.VerifyDownload(v, checksums, sig, file, bin); err != nil {
		t.Errorf("the published %s does not verify: %v", file, err)
	}
	if err := os.Chmod(filepath.Join(dir, file), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(filepath.Join(dir, file), "version").Output(); err != nil || !strings.HasPrefix(string(b), "slipway v9.9.9 ") {
		t.Errorf("the published slipway reports %q %v", b, err)
	}

	// A tag that is not at HEAD: refused, nothing published.
	out, err = run("v9.9.8")
	if err == nil || !strings.Contains(out, "v9.9.8 is not a tag of commit") {
		t.Errorf("act push v9.9.8 (not a tag of HEAD): %v\n%s", err, out)
	}
	ref, _ := name.ParseReference(host + "/slipway-dev/slipway:v9.9.8")
	if _, err := remote.Head(ref); err == nil {
		t.Errorf("%s exists after a refused release", ref)
	}
	if _, err := os.Stat(filepath.Join(files, "v9.9.8")); err == nil {
		t.Errorf("files published for a refused release")
	}
}
