package pin

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestFindShapes: beyond known kinds, a containers list of objects with an
// image anywhere, and any other string field named image that parses as a
// reference or is a placeholder.
func TestFindShapes(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "container lists of a custom resource, at any depth",
			yaml: `apiVersion: ci.example.com/v1
kind: Runner
spec:
  pool:
    template:
      containers:
      - name: runner
        image: ghcr.io/example/runner:2
        imagePullPolicy: Always
      initContainers: [{name: a, image: "alpine:3.20"}]
  debug:
    ephemeralContainers:
    - image: busybox
`,
			want: []string{
				"8:16 spec.pool.template.containers[0].image container ghcr.io/example/runner:2 Always by=pod-spec-shape",
				"10:41 spec.pool.template.initContainers[0].image container alpine:3.20 by=pod-spec-shape",
				"13:14 spec.debug.ephemeralContainers[0].image container busybox by=pod-spec-shape",
			},
		},
		{
			name: "not a pod spec shape: strings, objects without image, a schema",
			yaml: `kind: Thing
spec:
  containers: [web, db]
  initContainers: [{name: no-image}]
  schema:
    containers: {type: array, items: {type: object}}
    image: {type: string, description: the image to run}
`,
		},
		{
			name: "image-like fields: strings that parse, nothing else",
			yaml: `apiVersion: apps.example.com/v1
kind: App
metadata:
  annotations:
    image: registry.example.com:5000/team/migrate:v7
spec:
  cache:
    image: redis:7
    imagePullPolicy: IfNotPresent
  chart:
    image: {repository: nginx, tag: "1.25"}
  logo:
    image: "https://example.com/logo.png"
  caption:
    image: A picture of a ship
  count:
    image: 42
  flag:
    image: true
  empty:
    image: ""
  null:
    image: ~
  list:
    image: [nginx:1.25]
  pinned:
    image: nginx@sha256:0000000000000000000000000000000000000000000000000000000000000001
`,
			want: []string{
				"5:12 metadata.annotations.image custom registry.example.com:5000/team/migrate:v7 by=image-like",
				"8:12 spec.cache.image custom redis:7 IfNotPresent by=image-like",
				"27:12 spec.pinned.image custom nginx@sha256:0000000000000000000000000000000000000000000000000000000000000001 by=image-like",
			},
		},
		{
			name: "placeholders, in known kinds, shapes and image-like fields",
			yaml: `apiVersion: tekton.dev/v1
kind: Task
spec:
  steps:
  - name: build
    image: $(params.builder)
  - name: env
    image: ${BUILDER_IMAGE}
---
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
      - image: registry.example.com/app:__TAG__
      - image: ko://github.com/example/cmd/app
---
kind: Job
variables:
  image: $CI_REGISTRY_IMAGE:latest
  other:
    image: '{% raw %}x{% endraw %}'
`,
			want: []string{
				"6:12 spec.steps[0].image container $(params.builder) placeholder=$(…)",
				"8:12 spec.steps[1].image container ${BUILDER_IMAGE} placeholder=${…}",
				"16:16 spec.template.spec.containers[0].image container {{ .Values.image.repository }}:{{ .Values.image.tag }} placeholder={{…}}",
				"17:16 spec.template.spec.containers[1].image container registry.example.com/app:__TAG__ placeholder=__…__",
				"18:16 spec.template.spec.containers[2].image container ko://github.com/example/cmd/app placeholder=ko://",
				"22:10 variables.image custom $CI_REGISTRY_IMAGE:latest by=image-like placeholder=$NAME",
				"24:12 variables.other.image custom {% raw %}x{% endraw %} by=image-like placeholder={{…}}",
			},
		},
		{
			name: "documents that are no objects: compose files, playbooks",
			yaml: `services:
  web:
    image: nginx:1.25
  db:
    image: postgres:16
---
- hosts: all
  tasks:
  - name: run
    docker_container:
      name: cache
      image: redis:7
`,
			want: []string{
				"3:12 services.web.image custom nginx:1.25 by=image-like",
				"5:12 services.db.image custom postgres:16 by=image-like",
				"12:14 [0].tasks[0].docker_container.image custom redis:7 by=image-like",
			},
		},
		{
			name: "aliases and merge keys: one site per node, found by the first rule",
			yaml: `kind: Thing
defaults: &d
  image: alpine:3.20
spec:
  a: &c [{image: "busybox:1.36"}]
  b:
    containers: *c
  c:
    <<: *d
  d:
    <<: {image: "redis:7"}
  e:
    image: *d
`,
			want: []string{
				"3:10 defaults.image custom alpine:3.20 by=image-like",
				"5:18 spec.a[0].image custom busybox:1.36 by=image-like",
				"11:17 spec.d.image custom redis:7 by=image-like",
			},
		},
		{
			name: "items of a List, each an object: its known kinds first, then shapes",
			yaml: `apiVersion: v1
kind: List
items:
- apiVersion: example.com/v1
  kind: Widget
  spec: {image: "nginx:1.25"}
- apiVersion: apps/v1
  kind: Deployment
  spec:
    template:
      metadata:
        annotations: {image: "redis:7"}
      spec:
        containers: [{image: "postgres:16"}]
`,
			want: []string{
				"6:17 items[0].spec.image custom nginx:1.25 by=image-like",
				"14:30 items[1].spec.template.spec.containers[0].image container postgres:16",
				"12:30 items[1].spec.template.metadata.annotations.image custom redis:7 by=image-like",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"x.yaml": tc.yaml})
			tree, err := Find(context.Background(), []string{dir})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tree.Sites() {
				got = append(got, siteLine(s))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sites:\n got %q\nwant %q", got, tc.want)
			}
			checkPositions(t, tree)
		})
	}
}

func TestPlaceholder(t *testing.T) {
	for v, want := range map[string]string{
		"${IMAGE}":                        "${…}",
		"reg.example.com/app:${TAG}":      "${…}",
		"$(params.image)":                 "$(…)",
		"$(context.taskRun.name)":         "$(…)",
		"{{ .Values.image }}":             "{{…}}",
		"{{inputs.parameters.image}}":     "{{…}}",
		"{%- if x %}a{% endif %}":         "{{…}}",
		"__IMAGE__":                       "__…__",
		"app:__TAG_1__":                   "__…__",
		"$IMAGE":                          "$NAME",
		"reg/$_x":                         "$NAME",
		"ko://github.com/example/cmd/app": "ko://",
		"nginx:1.25":                      "",
		"repo__with__separators:1":        "__…__", // a valid repository name that looks like one: said so
		"a____b":                          "",
		"$":                               "",
		"a$1":                             "",
		"nginx@sha256:" + strings.Repeat("0", 64): "",
	} {
		if got := placeholder(v); got != want {
			t.Errorf("placeholder(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestLintShapesAndPlaceholders(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"x.yaml": `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
spec:
  podTemplate:
    spec:
      initContainers: [{name: git, image: alpine/git}]
      containers: [{name: sh, image: busybox}]
---
kind: Runner
spec:
  containers: [{image: "alpine:latest"}]
  cache: {image: "redis:7"}
  builder: {image: "${BUILDER}"}
`})
	var got []string
	for _, f := range Lint(findDir(t, dir)) {
		rel, _ := filepath.Rel(dir, f.File)
		got = append(got, strings.Join([]string{rel, f.Ref, string(f.FoundBy), f.Reason}, " | "))
	}
	want := []string{
		"x.yaml | alpine/git | known-kind | " + ReasonNoTag,
		"x.yaml | busybox | known-kind | " + ReasonNoTag,
		"x.yaml | alpine:latest | pod-spec-shape | " + ReasonLatest,
		"x.yaml | redis:7 | image-like | " + ReasonImageLike + ": " + ReasonTag,
		"x.yaml | ${BUILDER} | image-like | " + ReasonPlaceholder,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkPositions: every located site's line:col is where its text is.
func checkPositions(t *testing.T, tree *Tree) {
	t.Helper()
	for _, f := range tree.Files {
		for i, s := range f.Sites {
			if tg := f.targets[i]; tg.entryNodes == nil {
				off, ok := f.src.lines.offset(s.Line, s.Col)
				if !ok || tg.img.why != spliceable || tg.img.start != off {
					t.Errorf("%s: offset %d ok=%v, at %+v", s.Pos(), off, ok, tg.img)
				}
			}
		}
	}
}
