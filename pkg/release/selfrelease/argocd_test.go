package selfrelease

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestPinArgoCD makes a snapshot release of slipway-cmp for the host's
// platform, pushed to an in-process registry, runs make pin-argocd's script
// (tools/pin-release.sh: slipway pin --write --refresh, then
// slipway lint) over a copy of integrations/argocd, and checks the
// kustomization now names that release's index by digest, the patch still
// names the placeholder the entry renames, and the committed folder still
// holds its documented placeholder. A wrong repository is refused, nothing
// written.
func TestPinArgoCD(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	ctx := context.Background()
	sv, _ := testSigner(t)
	host := newRegistry(t, nil)
	res, err := Release(ctx, Options{Dir: moduleRoot, Out: filepath.Join(t.TempDir(), "dist"), Snapshot: true,
		Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}, Programs: []string{"slipway-cmp"}, Signer: sv,
		Repository: host + "/slipway-dev", Push: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 1 || res.Images[0].Tag == "" {
		t.Fatalf("release: images %+v", res.Images)
	}
	digest := res.Images[0].Digest

	bin := filepath.Join(t.TempDir(), "slipway")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/slipway")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway: %v\n%s", err, out)
	}
	src := filepath.Join(moduleRoot, "integrations", "argocd")
	dir := t.TempDir()
	for _, f := range []string{"kustomization.yaml", "repo-server-patch.yaml", "plugin.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, _ := os.ReadFile(filepath.Join(src, "kustomization.yaml"))
	if !regexp.MustCompile(`(?m)^    digest: sha256:0{64}$`).Match(committed) || !strings.Contains(string(committed), "placeholder") {
		t.Errorf("the committed kustomization.yaml no longer holds the documented placeholder digest: a real digest must come from a published release")
	}
	pinRelease := func(repo string) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", filepath.Join(moduleRoot, "tools", "pin-release.sh"), dir, repo, res.Version)
		cmd.Env = append(os.Environ(), "SLIPWAY="+bin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// A repository the release was not pushed to: pin fails, the digest stays.
	if out, err := pinRelease(host + "/elsewhere"); err == nil {
		t.Fatalf("pin-release.sh against a repository without the release succeeded:\n%s", out)
	} else if b, _ := os.ReadFile(filepath.Join(dir, "kustomization.yaml")); !regexp.MustCompile(`digest: sha256:0{64}`).Match(b) {
		t.Errorf("a failed pin wrote a digest:\n%s", b)
	}

	out, err := pinRelease(host + "/slipway-dev")
	if err != nil {
		t.Fatalf("pin-release.sh: %v\n%s", err, out)
	}
	t.Logf("pin-release.sh:\n%s", out)
	k, _ := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	want := "  - name: slipway\n    newName: " + host + "/slipway-dev/slipway-cmp\n    newTag: " + res.Version + "\n    digest: " + digest + "\n"
	if !strings.Contains(string(k), want) {
		t.Errorf("kustomization.yaml after the pin does not hold\n%s\nit holds:\n%s", want, k)
	}
	patch, _ := os.ReadFile(filepath.Join(dir, "repo-server-patch.yaml"))
	if !strings.Contains(string(patch), "          image: slipway\n") {
		t.Errorf("repo-server-patch.yaml no longer names the placeholder the images entry renames:\n%s", patch)
	}
	// slipway lint exits non-zero on a finding: run it again on its own.
	lint := exec.CommandContext(ctx, bin, "lint", dir)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("slipway lint after the pin: %v\n%s", err, out)
	}
}
