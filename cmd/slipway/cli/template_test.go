package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busyboxBase makes a tiny rootfs from the host's busybox-static with the
// project's fixture script and pushes it with `slipway image from-dir`.
func busyboxBase(t *testing.T, host string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if out, err := exec.Command("bash", "../../../fixtures/base/busybox-rootfs.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	r := run(t, "", "image", "from-dir", dir, "--push", host+"/slipway/base:busybox")
	if r.code != 0 || !strings.HasPrefix(r.stdout, host+"/slipway/base:busybox@sha256:") {
		t.Fatalf("image from-dir: %+v", r)
	}
	return strings.TrimSpace(r.stdout)
}

func TestTemplateBuildAndScan(t *testing.T) {
	_, host, _ := registryWith(t)
	base := busyboxBase(t, host)
	// The sample template, with the registry's address.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../../templates/minimal")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "template.yaml")
	b, _ := os.ReadFile(spec)
	os.WriteFile(spec, []byte(strings.ReplaceAll(string(b), "127.0.0.1:5000/slipway/base:busybox", base)), 0o644)

	layout := filepath.Join(t.TempDir(), "layout")
	keys := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "build-key-pw")
	if r := run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(keys, "release")); r.code != 0 {
		t.Fatalf("keys generate: %+v", r)
	}
	results := t.TempDir()
	r := run(t, "", "template", "build", spec, "--push", host+"/templates/minimal", "--oci-layout", layout,
		"--sign-key", filepath.Join(keys, "release.key"), "--offline-no-tlog", "--builder-id", "https://ci.example/builders/t",
		"--ci", "tekton", "--tekton-results", results)
	if r.code != 0 {
		t.Fatalf("template build: %+v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "build-key-pw") {
		t.Fatal("the key password was printed")
	}
	var res struct {
		Name, TemplateID, ContentID, Ref, BaseDigest string
		Scan                                         struct{ Findings []any }
		Tests                                        []struct {
			Name   string
			Passed bool
		}
		SBOM struct{ Files []struct{ Path string } }
		Sign struct {
			Ref          string
			Signature    struct{ Tag, Status string }
			Attestations []struct{ PredicateType, Status string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if res.Name != "minimal" || !strings.HasPrefix(res.TemplateID, "sha256:") || !strings.HasPrefix(res.ContentID, "fs-") ||
		res.Ref != host+"/templates/minimal@"+res.TemplateID || !strings.HasSuffix(base, res.BaseDigest) ||
		len(res.Tests) != 1 || !res.Tests[0].Passed || len(res.SBOM.Files) != 2 {
		t.Fatalf("result %+v", res)
	}
	if res.Sign.Ref != res.Ref || res.Sign.Signature.Status != "created" || len(res.Sign.Attestations) != 3 {
		t.Fatalf("sign result %+v", res.Sign)
	}
	// The Tekton results: Chains' IMAGE_URL and IMAGE_DIGEST, and the step's outputs; never the password.
	for name, want := range map[string]string{"IMAGE_URL": host + "/templates/minimal", "IMAGE_DIGEST": res.TemplateID,
		"DIGEST": res.TemplateID, "REF": res.Ref, "TEMPLATE_ID": res.TemplateID, "CONTENT_ID": res.ContentID} {
		if got := read(t, filepath.Join(results, name)); got != want {
			t.Errorf("Tekton result %s = %q, want %q", name, got, want)
		}
	}
	ents, _ := os.ReadDir(results)
	for _, e := range ents {
		if strings.Contains(read(t, filepath.Join(results, e.Name())), "build-key-pw") {
			t.Fatalf("the key password is in result %s", e.Name())
		}
	}
	// The published template verifies against a policy requiring the key,
	// the builder, the build type and an SBOM.
	pol := filepath.Join(keys, "policy.yaml")
	os.WriteFile(pol, []byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: templates}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules:
    - name: templates
      match: {kinds: [workspace-template]}
      signatures: {keys: [release]}
      attestations:
        - {type: slsaprovenance, builderID: "https://ci.example/builders/t", buildType: "https://slipway.dev/template-build/v1"}
        - {type: sbom}
`), 0o644)
	if r := run(t, "", "verify", res.Ref, "--policy", pol, "--kind", "workspace-template"); r.code != 0 || !strings.HasPrefix(r.stdout, "verified ") {
		t.Fatalf("verify: %+v", r)
	}
	for _, f := range res.SBOM.Files {
		if _, err := os.Stat(f.Path); err != nil {
			t.Fatalf("sbom file: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
		t.Fatal("no OCI layout written")
	}
	if r := run(t, "", "template", "scan", res.Ref); r.code != 0 {
		t.Fatalf("scan of the published image: %+v", r)
	}
	// A planted secret in a directory: exit 1, path and rule, no value.
	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, "etc"), 0o755)
	token := "ghp_" + strings.Repeat("aB3dE5fG7h", 4)[:36]
	os.WriteFile(filepath.Join(bad, "etc", "tool.conf"), []byte("token = "+token+"\n"), 0o644)
	r = run(t, "", "template", "scan", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "/etc/tool.conf:1") || strings.Contains(r.stdout+r.stderr, token) {
		t.Fatalf("scan of a planted token: %+v", r)
	}
	if r := run(t, "", "template", "scan", bad, "--allow", "github-token:/etc/*.conf", "--allow", "high-entropy-secret:/etc/*.conf"); r.code != 0 {
		t.Fatalf("allowed: %+v", r)
	}
	if r := run(t, "", "template", "build", filepath.Join(dir, "missing.yaml")); r.code == 0 || !strings.Contains(r.stderr, "missing.yaml") {
		t.Fatalf("missing spec: %+v", r)
	}
}
