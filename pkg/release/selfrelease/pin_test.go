package selfrelease

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestPinReleased makes one snapshot release of slipway and slipway-cmp for
// the host's platform, pushed to an in-process registry, and builds slipway
// once; then pins with it what installs Slipway (tools/pin-release.sh: slipway
// pin --write --refresh, then slipway lint), each over a copy:
//
//   - argocd: integrations/argocd (make pin-argocd) names the released
//     slipway-cmp index by digest, the patch still names the placeholder the
//     entry renames; a wrong repository is refused, nothing written;
//   - deploy: deploy/base (make pin-deploy) names the released slipway
//     index, and both overlays build with every container on it by digest.
//
// The committed folders still hold their documented placeholders.
func TestPinReleased(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	ctx := context.Background()
	sv, _ := testSigner(t)
	host := newRegistry(t, nil)
	res, err := Release(ctx, Options{Dir: moduleRoot, Out: filepath.Join(t.TempDir(), "dist"), Snapshot: true,
		Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}, Programs: []string{"slipway", "slipway-cmp"}, Signer: sv,
		Repository: host + "/slipway-dev", Push: true})
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, im := range res.Images {
		if im.Tag == "" {
			t.Fatalf("release: image %+v has no tag", im)
		}
		digests[im.Program] = im.Digest
	}
	if len(digests) != 2 || digests["slipway"] == "" || digests["slipway-cmp"] == "" {
		t.Fatalf("release: images %+v", res.Images)
	}
	bin := filepath.Join(t.TempDir(), "slipway")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/slipway")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway: %v\n%s", err, out)
	}
	t.Run("argocd", func(t *testing.T) { pinArgoCD(ctx, t, host, res, digests["slipway-cmp"], bin) })
	t.Run("deploy", func(t *testing.T) { pinDeploy(ctx, t, host, res, digests["slipway"], bin) })
}

func pinArgoCD(ctx context.Context, t *testing.T, host string, res *Result, digest, bin string) {
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

func pinDeploy(ctx context.Context, t *testing.T, host string, res *Result, digest, bin string) {
	src := filepath.Join(moduleRoot, "deploy")
	dir := t.TempDir()
	for _, sub := range []string{"base", "overlays"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(src, sub))); err != nil {
			t.Fatal(err)
		}
	}
	committed, _ := os.ReadFile(filepath.Join(src, "base", "kustomization.yaml"))
	if !regexp.MustCompile(`(?m)^    digest: sha256:0{64}$`).Match(committed) || !strings.Contains(string(committed), "placeholder") {
		t.Errorf("the committed deploy/base/kustomization.yaml no longer holds the documented placeholder digest: a real digest must come from a published release")
	}
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(moduleRoot, "tools", "pin-release.sh"), filepath.Join(dir, "base"), host+"/slipway-dev", res.Version, "slipway")
	cmd.Env = append(os.Environ(), "SLIPWAY="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pin-release.sh: %v\n%s", err, out)
	}
	t.Logf("pin-release.sh:\n%s", out)
	k, _ := os.ReadFile(filepath.Join(dir, "base", "kustomization.yaml"))
	want := "  - name: slipway\n    newName: " + host + "/slipway-dev/slipway\n    newTag: " + res.Version + "\n    digest: " + digest + "\n"
	if !strings.Contains(string(k), want) {
		t.Errorf("kustomization.yaml after the pin does not hold\n%s\nit holds:\n%s", want, k)
	}
	image := host + "/slipway-dev/slipway:" + res.Version + "@" + digest
	for _, o := range []string{"single", "ha"} {
		rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "overlays", o))
		if err != nil {
			t.Fatalf("kustomize build overlays/%s after the pin: %v", o, err)
		}
		y, err := rm.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		images := regexp.MustCompile(`(?m)^ +image: (.+)$`).FindAllStringSubmatch(string(y), -1)
		if len(images) != 2 {
			t.Errorf("overlays/%s: %d containers, want 2 (control plane and runtime)", o, len(images))
		}
		for _, m := range images {
			if m[1] != image {
				t.Errorf("overlays/%s: image %s, want %s", o, m[1], image)
			}
		}
	}
	// the placeholder the entry renames is still what the Deployments name
	_ = filepath.WalkDir(filepath.Join(dir, "base"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(p) != "deployment.yaml" {
			return err
		}
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), "          image: slipway\n") {
			t.Errorf("%s no longer names the placeholder the images entry renames", p)
		}
		return nil
	})
	lint := exec.CommandContext(ctx, bin, "lint", filepath.Join(dir, "base"))
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("slipway lint after the pin: %v\n%s", err, out)
	}
}
