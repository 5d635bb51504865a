package pin

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "rewrite", "custom", "pinconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Fields: []FieldSpec{
			{Kind: "Pipeline", Path: "spec.steps[].image"},
			{APIVersion: "workflows.example.com/v1", Kind: "Pipeline", Path: "spec.tools[]"},
		},
		PodSpecs: []FieldSpec{
			{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxTemplate", Path: "spec.podTemplate.spec"},
			{Kind: "Sandbox", Path: "spec.podTemplate.spec"},
		},
		Exclude: []Exclude{{
			APIVersion: "workflows.example.com/v2", Kind: "Pipeline", Path: "spec.steps[]",
			Where: filepath.Join("testdata", "rewrite", "custom", "pinconfig.yaml") + ":16:3",
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	head := "apiVersion: slipway.dev/v1alpha1\nkind: PinConfig\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top field", head + "feilds: []\n", "c.yaml:3:1: invalid pin config: PinConfig: unknown field \"feilds\""},
		{"unknown entry field", head + "fields:\n- kind: X\n  path: a\n  pth: b\n", "c.yaml:6:3: invalid pin config: fields[0]: unknown field \"pth\""},
		{"repeated field", head + "kind: PinConfig\n", "c.yaml:3:1: invalid pin config: PinConfig: field \"kind\" repeated"},
		{"wrong kind", "apiVersion: slipway.dev/v1alpha1\nkind: Config\n", "c.yaml:2:7: invalid pin config: kind \"Config\", want PinConfig"},
		{"wrong apiVersion", "apiVersion: v1\nkind: PinConfig\n", "c.yaml:1:13: invalid pin config: apiVersion \"v1\""},
		{"missing kind", "apiVersion: slipway.dev/v1alpha1\n", "c.yaml:1:1: invalid pin config: apiVersion slipway.dev/v1alpha1 and kind PinConfig are required"},
		{"bad path", head + "podSpecs:\n- kind: X\n  path: spec..a\n", "c.yaml:5:9: invalid pin config: podSpecs[0]: path \"spec..a\": bad element \"\""},
		{"bracket inside key", head + "fields:\n- kind: X\n  path: a[b].c\n", "c.yaml:5:9: invalid pin config: fields[0]: path \"a[b].c\""},
		{"index not a number", head + "fields:\n- kind: X\n  path: a[01]\n", "c.yaml:5:9: invalid pin config: fields[0]: path \"a[01]\""},
		{"no path", head + "fields:\n- kind: X\n", "c.yaml:4:3: invalid pin config: fields[0]: kind and path are required"},
		{"not a list", head + "fields: {kind: X}\n", "c.yaml:3:9: invalid pin config: fields is not a list"},
		{"not a string", head + "fields:\n- kind: [X]\n  path: a\n", "c.yaml:4:9: invalid pin config: fields[0].kind is not a string"},
		{"alias", head + "fields:\n- &e {kind: X, path: a}\npodSpecs: [*e]\n", "invalid pin config"},
		{"two documents", head + "---\n" + head, "c.yaml:3: invalid pin config: more than one document"},
		{"syntax", head + "fields: [\n", "c.yaml:3: input refused: invalid yaml"},
		{"empty", "", "c.yaml: invalid pin config: empty file"},
		{"empty exclusion", head + "exclude:\n- {}\n", "c.yaml:4:3: invalid pin config: exclude[0]: one of apiVersion, kind, path and foundBy is required"},
		{"unknown exclusion field", head + "exclude:\n- kind: X\n  file: a.yaml\n", "c.yaml:5:3: invalid pin config: exclude[0]: unknown field \"file\""},
		{"unknown rule", head + "exclude:\n- foundBy: guess\n", "c.yaml:4:12: invalid pin config: exclude[0]: foundBy \"guess\", want one of known-kind, pod-spec-shape, image-like, config"},
		{"bad exclusion path", head + "exclude:\n- path: a[-1]\n", "c.yaml:4:9: invalid pin config: exclude[0]: path \"a[-1]\""},
		{"exclusions not a list", head + "exclude: {kind: X}\n", "c.yaml:3:10: invalid pin config: exclude is not a list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"c.yaml": tc.yaml})
			_, err := LoadConfig(filepath.Join(dir, "c.yaml"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	if err := (Config{Fields: []FieldSpec{{Path: "a"}}}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("validate without kind: %v", err)
	}
	for _, x := range []Exclude{{}, {FoundBy: "guess"}, {Path: "a..b"}} {
		if err := (Config{Exclude: []Exclude{x}}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("validate exclusion %+v: %v", x, err)
		}
	}
	if _, err := Find(t.Context(), []string{"testdata"}, WithConfig(Config{PodSpecs: []FieldSpec{{Kind: "X", Path: "a[]b"}}})); !errors.Is(err, ErrConfig) {
		t.Errorf("WithConfig with a bad path: %v", err)
	}
}

// TestExclude: excluded sites are found and counted, never linted, resolved
// or rewritten; an exclusion selects by apiVersion, kind, path prefix and
// rule, every field given.
func TestExclude(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"pinconfig.yaml.txt": `apiVersion: slipway.dev/v1alpha1
kind: PinConfig
exclude:
- kind: ConfigMap
- kind: Task
  path: spec.steps[1]
- path: metadata.annotations
  foundBy: image-like
- apiVersion: example.com/v2
- path: spec.*.image
  kind: Runner
`,
		"x.yaml": `apiVersion: tekton.dev/v1
kind: Task
metadata:
  annotations: {image: "redis:7"}
spec:
  steps:
  - {name: a, image: "nginx:1.25"}
  - {name: b, image: "busybox:1.36"}
---
apiVersion: v1
kind: ConfigMap
data: {image: "alpine:3.20"}
---
apiVersion: example.com/v2
kind: Runner
spec: {containers: [{image: "postgres:16"}]}
---
apiVersion: example.com/v1
kind: Runner
spec:
  cache: {image: "golang:1.26"}
  containers: [{image: "python:3.12-slim"}]
`,
	})
	cfg, err := LoadConfig(filepath.Join(dir, "pinconfig.yaml.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := Find(t.Context(), []string{filepath.Join(dir, "x.yaml")}, WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range tree.Sites() {
		got = append(got, s.Value+" "+strings.TrimPrefix(s.ExcludedBy, filepath.Join(dir, "pinconfig.yaml.txt")))
	}
	want := []string{
		"nginx:1.25 ",
		"busybox:1.36 :5:3",
		"redis:7 :7:3",
		"alpine:3.20 :4:3",
		"postgres:16 :9:3",
		"golang:1.26 :10:3",
		"python:3.12-slim ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sites and exclusions:\n got %q\nwant %q", got, want)
	}
	var linted []string
	for _, f := range Lint(tree) {
		linted = append(linted, f.Ref)
	}
	if !reflect.DeepEqual(linted, []string{"nginx:1.25", "python:3.12-slim"}) {
		t.Errorf("linted %q", linted)
	}
	tr := newTableResolver(t, testTable())
	res, err := Plan(t.Context(), tree, tr.resolver())
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, c := range res.Changes() {
		changed = append(changed, c.From)
	}
	if !reflect.DeepEqual(changed, []string{"nginx:1.25", "python:3.12-slim"}) || len(tr.calls()) != 2 {
		t.Errorf("changed %q, asked %v", changed, tr.calls())
	}
}
