package pin

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFindSkipsAndSummary: what a walk leaves alone is named, and the
// summary counts references by rule and by state, never more than found.
func TestFindSkipsAndSummary(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"deploy/web.yaml": `apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - image: nginx:1.25@` + dg(1) + `
      - image: ${SIDECAR}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
spec:
  podTemplate:
    spec:
      containers: [{image: busybox}, {image: alpine/git}]
`,
		"deploy/kustomization.yaml": "resources: [runner.yaml]\nimages:\n- {name: runner, newName: reg.example.com/runner, newTag: v1}\n",
		"deploy/runner.yaml":        "kind: Pod\nspec: {containers: [{image: runner}]}\n",
		"chart/values.yaml":         "image: nginx:1.25\nreplicas: 2\n",
		"chart/templates/web.yaml":  "{{- if .Values.enabled }}\nkind: Deployment\n{{- end }}\n",
		"chart/Chart.yml":           "name: chart\n",
		"custom/runner.yaml":        "kind: Runner\nspec: {pool: {containers: [{image: \"redis:7\"}]}, skip: {image: \"redis:7\"}}\n",
		".github/workflows/ci.yaml": "jobs: {test: {container: {image: golang:1.26}}}\n",
		".git/config.yaml":          "image: never:1\n",
		"notes.md":                  "image: not-read:1\n",
		"Makefile":                  "all:\n",
	})
	cfg := Config{Exclude: []Exclude{{Kind: "Runner", Path: "spec.skip"}}}
	tree, err := Find(context.Background(), []string{dir}, WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	got := tree.Summary()
	want := Summary{
		Files: 6, Documents: 7,
		References: 7,
		Found:      map[FoundBy]int{ByKind: 5, ByShape: 1, ByImageKey: 1},
		Pinned:     1, Unpinned: 5, Placeholders: 1,
		Excluded: 1, KustomizePlaceholders: 1,
		Skipped: map[SkipKind]int{SkipHidden: 2, SkipTemplate: 1},
		NotYAML: 2,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summary\n got %+v\nwant %+v", got, want)
	}
	var skipped []string
	for _, s := range tree.Skipped {
		rel, _ := filepath.Rel(dir, s.Path)
		skipped = append(skipped, string(s.Kind)+" "+rel+": "+s.Reason)
	}
	wantSkipped := []string{
		"hidden .git: version control metadata, never walked",
		"hidden .github: hidden directory, not walked",
		"template chart/templates/web.yaml: template braces and line 1 does not parse as YAML: did not find expected node content",
	}
	if !reflect.DeepEqual(skipped, wantSkipped) {
		t.Errorf("skipped\n got %q\nwant %q", skipped, wantSkipped)
	}
	if !reflect.DeepEqual(tree.NotYAML, map[string]int{".md": 1, "": 1}) {
		t.Errorf("not YAML %v", tree.NotYAML)
	}

	// With hidden directories: .github is read, .git never.
	tree, err = Find(context.Background(), []string{dir}, WithIncludeHidden())
	if err != nil {
		t.Fatal(err)
	}
	if s := tree.Summary(); s.Files != 7 || s.Skipped[SkipHidden] != 1 || s.Found[ByImageKey] != 3 {
		t.Errorf("with hidden: %+v", s)
	}

	// A template named explicitly is an error, as is YAML that does not
	// parse without template braces.
	if _, err := Find(context.Background(), []string{filepath.Join(dir, "chart", "templates", "web.yaml")}); !errors.Is(err, ErrInput) {
		t.Errorf("explicit template: %v", err)
	}
}

func TestFindNoYAML(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"docs/a.md":              "# a\n",
		"docs/b.json":            "{}\n",
		"docs/.hidden/c.yaml":    "kind: Pod\n",
		"tpl/templates/x.yaml":   "{{ if }}\n: [\n",
		"ok/x.yaml":              "kind: Pod\n",
		"ok/.github/ci.yaml":     "kind: Pod\n",
		"empty/.keep-not-a-file": "",
	})
	for _, tc := range []struct {
		path, want string
	}{
		{"docs", "docs: input refused: no YAML files (.yaml, .yml, Kustomization): 2 files not YAML, 1 hidden directory not walked"},
		{"tpl", "tpl: input refused: no YAML files (.yaml, .yml, Kustomization): 1 template not parsing as YAML"},
	} {
		_, err := Find(context.Background(), []string{filepath.Join(dir, "ok"), filepath.Join(dir, tc.path)})
		if !errors.Is(err, ErrNoYAML) || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
			t.Errorf("%s: got %v\nwant %s", tc.path, err, tc.want)
		}
	}
	empty := t.TempDir()
	if _, err := Find(context.Background(), []string{empty}); !errors.Is(err, ErrNoYAML) || !strings.Contains(err.Error(), "it is empty") {
		t.Errorf("empty: %v", err)
	}
	// Hidden YAML counts once walked; an explicit file is read whatever its
	// name when it holds a mapping or a list, and is no YAML when it does not.
	if _, err := Find(context.Background(), []string{filepath.Join(dir, "docs")}, WithIncludeHidden()); err != nil {
		t.Errorf("docs with hidden: %v", err)
	}
	if _, err := Find(context.Background(), []string{filepath.Join(dir, "docs", "b.json")}); err != nil {
		t.Errorf("explicit: %v", err)
	}
	if _, err := Find(context.Background(), []string{filepath.Join(dir, "docs", "a.md")}); !errors.Is(err, ErrNoYAML) || !strings.Contains(err.Error(), "a.md: input refused: no YAML files: it holds no YAML document") {
		t.Errorf("explicit text: %v", err)
	}
}
