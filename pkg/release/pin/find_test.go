package pin

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// siteLine is the part of a Site a table states: "line:col path kind value
// [policy] [by=rule, unless known-kind] [placeholder=syntax]".
func siteLine(s Site) string {
	out := strings.Join([]string{strconv.Itoa(s.Line) + ":" + strconv.Itoa(s.Col), s.Path, s.Kind.String(), s.Value}, " ")
	if s.PullPolicy != "" {
		out += " " + s.PullPolicy
	}
	if s.FoundBy != ByKind {
		out += " by=" + string(s.FoundBy)
	}
	if s.Placeholder != "" {
		out += " placeholder=" + s.Placeholder
	}
	return out
}

func TestFindSites(t *testing.T) {
	cases := []struct {
		name string
		file string // base name; default x.yaml
		yaml string
		cfg  *Config
		want []string
	}{
		{
			name: "pod containers init ephemeral and pull policy",
			yaml: `apiVersion: v1
kind: Pod
spec:
  containers:
  - name: a
    image: nginx:1.25
    imagePullPolicy: Always
  initContainers:
  - image: "busybox:1.36"
  ephemeralContainers:
  - image: 'alpine'
`,
			want: []string{
				"6:12 spec.containers[0].image container nginx:1.25 Always",
				"9:12 spec.initContainers[0].image container busybox:1.36",
				"11:12 spec.ephemeralContainers[0].image container alpine",
			},
		},
		{
			name: "cronjob nested template",
			yaml: "apiVersion: batch/v1\nkind: CronJob\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{image: redis:7}]\n",
			want: []string{"8:32 spec.jobTemplate.spec.template.spec.containers[0].image container redis:7"},
		},
		{
			name: "workload kinds by group; missing apiVersion matches by kind; a kind of another group by its shape",
			yaml: `kind: Deployment
spec: {template: {spec: {containers: [{image: a:1}]}}}
---
apiVersion: extensions/v1beta1
kind: DaemonSet
spec: {template: {spec: {containers: [{image: b:1}]}}}
---
apiVersion: apps/v1
kind: Job
spec: {template: {spec: {containers: [{image: not-batch:1}]}}}
---
apiVersion: v1
kind: ReplicationController
spec: {template: {spec: {containers: [{image: c:1}]}}}
`,
			want: []string{
				"2:47 spec.template.spec.containers[0].image container a:1",
				"6:47 spec.template.spec.containers[0].image container b:1",
				"10:47 spec.template.spec.containers[0].image container not-batch:1 by=pod-spec-shape",
				"14:47 spec.template.spec.containers[0].image container c:1",
			},
		},
		{
			name: "list items and typed list",
			yaml: `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, spec: {containers: [{image: a:1}]}}
- apiVersion: v1
  kind: PodList
  items:
  - spec: {containers: [{image: b:1}]}
`,
			want: []string{
				"4:59 items[0].spec.containers[0].image container a:1",
				"8:33 items[1].items[0].spec.containers[0].image container b:1",
			},
		},
		{
			name: "kustomization block and flow, composed values",
			yaml: `kind: Kustomization
images:
- name: nginx
  newTag: "1.25"
- {name: pg, newName: reg.example.com/pg, newTag: "16"}
- name: done
  newTag: v1
  digest: sha256:0000000000000000000000000000000000000000000000000000000000000001
- name: renamed-only
  newName: other
`,
			want: []string{
				"3:3 images[0] kustomize-image nginx:1.25",
				"5:3 images[1] kustomize-image reg.example.com/pg:16",
				"6:3 images[2] kustomize-image done:v1@sha256:0000000000000000000000000000000000000000000000000000000000000001",
				"9:3 images[3] kustomize-image other",
			},
		},
		{
			name: "kustomization by file name, without kind",
			file: "kustomization.yml",
			yaml: "images:\n- name: a\n  newTag: b\n",
			want: []string{"2:3 images[0] kustomize-image a:b"},
		},
		{
			name: "images key of another file without kind is not a kustomization",
			yaml: "images:\n- name: a\n  newTag: b\n",
		},
		{
			name: "alias dedupe, merge keys, tags and anchors, wide characters",
			yaml: `kind: Pod
metadata: {name: "ü✓"}
spec:
  containers:
  - &c {name: ü✓, image: &i nginx:1.25}
  - image: *i
  - <<: *c
    name: merged
  - image: !!str &j
      redis:7
`,
			want: []string{
				"5:29 spec.containers[0].image container nginx:1.25",
				"10:7 spec.containers[3].image container redis:7",
			},
		},
		{
			name: "null, missing and non-scalar images are no sites",
			yaml: "kind: Pod\nspec:\n  containers:\n  - image:\n  - image: ~\n  - name: x\n  - image: [a]\n",
		},
		{
			name: "custom fields and pod specs from config",
			yaml: `apiVersion: extensions.agents.x-k8s.io/v1alpha1
kind: SandboxTemplate
spec:
  podTemplate:
    spec:
      containers: [{image: python:3.12}]
---
apiVersion: x.example.com/v1
kind: Pipeline
spec:
  steps:
  - image: golang:1.26
  tools: [alpine:3.20]
`,
			cfg: &Config{
				Fields: []FieldSpec{{Kind: "Pipeline", Path: "spec.steps[].image"}, {APIVersion: "x.example.com/v1", Kind: "Pipeline", Path: "spec.tools[]"}},
				PodSpecs: []FieldSpec{{APIVersion: "extensions.agents.x-k8s.io/v1alpha1", Kind: "SandboxTemplate", Path: "spec.podTemplate.spec"},
					{APIVersion: "other/v1", Kind: "SandboxTemplate", Path: "spec"}},
			},
			want: []string{
				"6:28 spec.podTemplate.spec.containers[0].image container python:3.12",
				"12:12 spec.steps[0].image custom golang:1.26 by=config",
				"13:11 spec.tools[0] custom alpine:3.20 by=config",
			},
		},
		{
			name: "multi-document with comments and empty documents",
			yaml: "# lead\n---\n---\nkind: Pod\nspec: {containers: [{image: a:1}]}\n...\n---\n# only a comment\n",
			want: []string{"5:29 spec.containers[0].image container a:1"},
		},
		{
			name: "CRLF line endings and a byte order mark",
			yaml: bomUTF8 + "kind: Pod\r\nspec:\r\n  containers:\r\n  - image: a:1\r\n",
			want: []string{"4:12 spec.containers[0].image container a:1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.file
			if name == "" {
				name = "x.yaml"
			}
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{name: tc.yaml})
			var opts []Option
			if tc.cfg != nil {
				opts = append(opts, WithConfig(*tc.cfg))
			}
			tree, err := Find(context.Background(), []string{dir}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tree.Sites() {
				if s.File != filepath.Join(dir, name) {
					t.Errorf("site file %s", s.File)
				}
				got = append(got, siteLine(s))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sites:\n got %q\nwant %q", got, tc.want)
			}
			// Every located site's line:col is where its text is.
			f := tree.Files[0]
			for i, s := range f.Sites {
				if tg := f.targets[i]; tg.entryNodes == nil {
					off, ok := f.src.lines.offset(s.Line, s.Col)
					if !ok || tg.img.why != spliceable || tg.img.start != off {
						t.Errorf("%s: offset %d ok=%v, at %+v", s.Pos(), off, ok, tg.img)
					}
				}
			}
		})
	}
}
