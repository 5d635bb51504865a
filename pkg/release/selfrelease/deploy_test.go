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

// TestPinDeploy makes a snapshot release of slipway for the host's
// platform, pushed to an in-process registry, runs make pin-deploy's script
// (tools/pin-release.sh DIR REPO VERSION slipway: slipway pin --write
// --refresh, then slipway lint) over a copy of deploy/, and checks that
// both overlays now build with every container on that release's index by
// digest, while the committed deploy/base still holds its documented
// placeholder.
func TestPinDeploy(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	ctx := context.Background()
	sv, _ := testSigner(t)
	host := newRegistry(t, nil)
	res, err := Release(ctx, Options{Dir: moduleRoot, Out: filepath.Join(t.TempDir(), "dist"), Snapshot: true,
		Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH}, Programs: []string{"slipway"}, Signer: sv,
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
