package cli

import (
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
