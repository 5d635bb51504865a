package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// TestYAMLErrorsNameTheLine: through Main, an unknown field is named with
// the nearest valid one and no Go type, and a syntax error names the line at
// fault (yaml.v3 names the line before it for these).
func TestYAMLErrorsNameTheLine(t *testing.T) {
	const head = "apiVersion: slipway.dev/v1alpha1\nkind: WorkspaceTemplate\nspec:\n"
	dir := writeTree(t, map[string]string{
		"unknown.yaml": head + "  bsae: registry.example/base@sha256:0000\n",
		"tab.yaml":     head + "  base: x\n\t- run: a\n",
		"key.yaml":     head + "  base: x\n- run: a\n",
		"pod.yaml":     "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n- name: a\n",
	})
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"template", "build", "unknown.yaml"}, `unknown.yaml:4: invalid template spec: unknown field "bsae" (did you mean "base"?)`},
		{[]string{"template", "build", "tab.yaml"}, "tab.yaml:5: invalid template spec: found a tab character"},
		{[]string{"template", "build", "key.yaml"}, "key.yaml:5: invalid template spec: did not find expected key"},
		{[]string{"lint", "pod.yaml"}, "pod.yaml:5: input refused: invalid yaml: did not find expected key"},
		{[]string{"pin", "pod.yaml"}, "pod.yaml:5: input refused: invalid yaml: did not find expected key"},
	} {
		r := run(t, dir, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.say) || strings.Contains(r.stderr, "type template.") || strings.Contains(r.stderr, "not found in type") {
			t.Errorf("slipway %s: code %d, stderr %q; want 2 saying %q", strings.Join(c.args, " "), r.code, r.stderr, c.say)
		}
	}
}

// TestRegistryErrorsInWords: against Debian's docker-registry (distribution,
// whose errors carry a detail go-containerregistry prints as a Go map), a
// missing tag and a missing repository are said in words naming them.
func TestRegistryErrorsInWords(t *testing.T) {
	reg := registrytest.NewDistribution(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(reg.Addr() + "/platform/web:v1")
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ref, say string }{
		{reg.Addr() + "/platform/web:v9", "not found: manifest unknown: tag v9 not found in " + reg.Addr() + "/platform/web"},
		{reg.Addr() + "/platform/nope:v1", "not found in " + reg.Addr() + "/platform/nope"},
	} {
		r := run(t, "", "resolve", c.ref)
		if r.code != exitFailed || !strings.Contains(r.stderr, c.say) || strings.Contains(r.stderr, "map[") || strings.Contains(r.stderr, "MANIFEST_UNKNOWN") {
			t.Errorf("resolve %s: code %d, stderr %q; want 1 saying %q", c.ref, r.code, r.stderr, c.say)
		}
	}
}

// TestSignTagAndPromoteNoRepoSayTheFix: sign on a tag points at resolve;
// promote into a repository that is not there points at config init.
func TestSignTagAndPromoteNoRepoSayTheFix(t *testing.T) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1")
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "pw")
	if r := run(t, dir, "keys", "generate", "--output-key-prefix", "k"); r.code != 0 {
		t.Fatal(r)
	}
	for _, verb := range []string{"sign", "attest"} {
		args := []string{verb, host + "/platform/cp:v1", "--key", "k.key", "--offline-no-tlog"}
		if verb == "attest" {
			args = append(args, "--predicate", "p.json", "--type", "spdx")
		}
		r := run(t, dir, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, `"`+host+`/platform/cp:v1" is a tag`) || !strings.Contains(r.stderr, "run 'slipway resolve "+host+"/platform/cp:v1' for its digest") {
			t.Errorf("%s on a tag: %+v", verb, r)
		}
	}
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	if r := run(t, dir, "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--out-file", "g.yaml",
		"--pin", "controlPlane="+img("platform/cp:v1"), "--pin", "runner="+img("platform/runner:v1"),
		"--pin", "workspaceTemplate="+img("templates/tools:v1"), "--control-plane-protocol", "1", "--runner-protocol", "1"); r.code != 0 {
		t.Fatal(r)
	}
	r := run(t, dir, "promote", "--repo", "nope.git", "--pool", "agents", "--generation", "g.yaml", "--insecure-skip-verify")
	if r.code != exitUsage || !strings.Contains(r.stderr, "no repository at nope.git: no such file or directory") ||
		!strings.Contains(r.stderr, "slipway config init nope.git --pool agents") || strings.Count(r.stderr, "nope.git: ") > 1 {
		t.Errorf("promote into no repository: %+v", r)
	}
}

// TestNoDoubledWords: an id missing from the config repository is said
// once ("file does not exist: file does not exist" before), as what is not
// there.
func TestNoDoubledWords(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, dir, "config", "init", "cfg.git", "--pool", "agents"); r.code != 0 {
		t.Fatal(r)
	}
	r := run(t, dir, "generation", "show", "g-1a4ee8", "--repo", "cfg.git", "--pool", "agents")
	if r.code != exitUsage || strings.Count(r.stderr, "does not exist") > 1 || strings.Count(r.stderr, "g-1a4ee8") != 1 ||
		!strings.Contains(r.stderr, "no generation matches g-1a4ee8 in pool agents") {
		t.Errorf("generation show of a missing id: %+v", r)
	}
}

// TestGenerationCreateRefusesWrongKind: a signed image that is not a runner
// image is refused as the runner pin, and one that is not a template image
// as the template pin, by name (their config labels say what they are); exit 1.
func TestGenerationCreateRefusesWrongKind(t *testing.T) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1")
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "pw")
	if r := run(t, dir, "keys", "generate", "--output-key-prefix", "release"); r.code != 0 {
		t.Fatal(r)
	}
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	for rt := range digests {
		if r := run(t, dir, "sign", img(rt), "--key", "release.key", "--offline-no-tlog"); r.code != 0 {
			t.Fatal(r)
		}
	}
	pol := `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: agents}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules: [{name: images, signatures: {keys: [release]}}]
`
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	create := func(runner, tmpl string) result {
		return run(t, dir, "generation", "create", "--pool", "agents", "--policy", "policy.yaml", "--out-file", "g.yaml",
			"--pin", "controlPlane="+img("platform/cp:v1"), "--pin", "runner="+runner, "--pin", "workspaceTemplate="+tmpl,
			"--control-plane-protocol", "1", "--runner-protocol", "1")
	}
	r := create(img("platform/cp:v1"), img("templates/tools:v1"))
	if r.code != exitFailed || !strings.Contains(r.stderr, "pin runner "+host+"/platform/cp@") || !strings.Contains(r.stderr, "is not a runner image: its config has no dev.slipway.runner.sha256 label (slipway image runner makes one)") {
		t.Errorf("runner pin = the control plane: %+v", r)
	}
	r = create(img("platform/runner:v1"), img("platform/runner:v1"))
	if r.code != exitFailed || !strings.Contains(r.stderr, "pin workspaceTemplate "+host+"/platform/runner@") || !strings.Contains(r.stderr, "is not a workspace template image") {
		t.Errorf("template pin = the runner: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "g.yaml")); err == nil {
		t.Error("a refused generation was written")
	}
	if r := create(img("platform/runner:v1"), img("templates/tools:v1")); r.code != 0 {
		t.Errorf("the right kinds: %+v", r)
	}
}
