package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crTree is a tree of custom resources that embed pod templates and image
// fields, each image in HOST, and a dot-directory.
func crTree(host string) map[string]string {
	files := map[string]string{
		"sandbox/template.yaml": `apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: tools
spec:
  podTemplate:
    spec:
      initContainers:
      - name: clone
        image: HOST/alpine/git:2.45   # fetch the workspace
      containers:
      - name: shell
        image: HOST/busybox:1.36
---
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: one
spec:
  podTemplate:
    spec:
      containers: [{name: shell, image: "HOST/busybox:1.36"}]
`,
		"rollouts/analysis.yaml": `apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: smoke
spec:
  metrics:
  - name: job
    provider:
      job:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: check
                image: HOST/alpine:latest
`,
		"ci/workflow.yaml": `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: ci-
spec:
  templates:
  - name: build
    container:
      image: HOST/golang:1.26
---
apiVersion: tekton.dev/v1
kind: Task
metadata:
  name: test
spec:
  steps:
  - name: test
    image: HOST/golang:1.26
`,
		"ml/rayjob.yaml": `apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: train
spec:
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: head, image: "HOST/ray:2.41"}]
`,
		"custom/runner.yaml": `apiVersion: ci.example.com/v1
kind: RunnerPool
spec:
  pool:
    containers:
    - name: runner
      image: HOST/golang:1.26
  cache:
    image: HOST/redis:7
`,
		".github/workflows/ci.yaml": "jobs: {test: {container: {image: HOST/node:20}}}\n",
		"README.md":                 "image: HOST/not-read:1\n",
	}
	for k, v := range files {
		files[k] = strings.ReplaceAll(v, "HOST", host)
	}
	return files
}

// TestLintCustomResources is the case of the issue: custom resources with
// pod templates were reported as "0 references, all pinned".
func TestLintCustomResources(t *testing.T) {
	dir := writeTree(t, crTree("reg.example.com"))
	r := run(t, dir, "lint", ".")
	if r.code != 1 {
		t.Fatalf("lint: %+v", r)
	}
	for _, want := range []string{
		"sandbox/template.yaml:10:16: reg.example.com/alpine/git:2.45: " + "tag without digest",
		"sandbox/template.yaml:13:16: reg.example.com/busybox:1.36: ",
		"sandbox/template.yaml:22:41: reg.example.com/busybox:1.36: ",
		"rollouts/analysis.yaml:16:24: reg.example.com/alpine:latest: tag latest without digest",
		"ci/workflow.yaml:9:14: reg.example.com/golang:1.26: ",
		"ci/workflow.yaml:18:12: reg.example.com/golang:1.26: ",
		"ml/rayjob.yaml:10:44: reg.example.com/ray:2.41: ",
		"custom/runner.yaml:7:14: reg.example.com/golang:1.26: ",
		"custom/runner.yaml:9:12: reg.example.com/redis:7: image-like field not pinned: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("lint does not report %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "\n"); n != 9 {
		t.Errorf("%d findings:\n%s", n, r.stdout)
	}
	wantSummary := "9 image references in 5 files (7 documents): 7 by known kind, 1 by pod-spec shape, 1 in image-like fields\n" +
		"0 pinned by digest, 9 not\n" +
		"skipped: 1 hidden directory (.github; --include-hidden walks all but .git, .hg and .svn); 1 file not YAML (.md 1)\n"
	if r.stderr != wantSummary || strings.Contains(r.stderr, "all pinned") {
		t.Errorf("summary:\n%s\nwant\n%s", r.stderr, wantSummary)
	}

	r = run(t, dir, "lint", "--include-hidden", "-o", "json", ".")
	var lr lintReport
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &lr) != nil || len(lr.Findings) != 10 || lr.Summary.References != 10 ||
		lr.Summary.Found["image-like"] != 2 || lr.Summary.Skipped["hidden"] != 0 || lr.NotYAML[".md"] != 1 {
		t.Fatalf("lint --include-hidden json: %+v\n%+v", r, lr)
	}
}

// TestLintNothingToRead: a path with no YAML is an input error naming it,
// never "all pinned"; YAML without images says so.
func TestLintNothingToRead(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"docs/index.md":        "# docs\n",
		"docs/.hidden/a.yaml":  "kind: Pod\nspec: {containers: [{image: a:1}]}\n",
		"config/settings.yaml": "kind: ConfigMap\ndata: {level: info}\n",
	})
	r := run(t, dir, "lint", "docs")
	if r.code != 2 || !strings.Contains(r.stderr, "docs: input refused: no YAML files") || !strings.Contains(r.stderr, "1 file not YAML, 1 hidden directory not walked") ||
		strings.Contains(r.stderr, "pinned") {
		t.Fatalf("lint docs: %+v", r)
	}
	if r := run(t, dir, "pin", "docs"); r.code != 2 || !strings.Contains(r.stderr, "docs: input refused: no YAML files") {
		t.Fatalf("pin docs: %+v", r)
	}
	r = run(t, dir, "lint", "config")
	if r.code != 0 || r.stderr != "no image references in 1 file (1 document)\n" {
		t.Fatalf("lint config: %+v", r)
	}
	r = run(t, dir, "pin", "config")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "nothing to change: no image references found\n") {
		t.Fatalf("pin config: %+v", r)
	}
}

// TestPinCustomResourcesLockHermetic: pin pins every reference of the
// custom resources in one run, records them in the lock, a second run
// changes nothing, lint is clean, and the hermetic lock covers them all.
func TestPinCustomResourcesLockHermetic(t *testing.T) {
	srv, host, d := registryWith(t, "alpine/git:2.45", "busybox:1.36", "alpine:latest", "golang:1.26", "ray:2.41", "redis:7")
	dir := writeTree(t, crTree(host))
	r := run(t, dir, "pin", "--write", "--lock", "images.lock", ".")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "pinned 9 references in 5 files\n9 image references in 5 files (7 documents)") {
		t.Fatalf("pin: %+v", r)
	}
	lock := read(t, filepath.Join(dir, "images.lock"))
	for rt, dg := range d {
		if !strings.Contains(lock, "resolved: "+host+"/"+rt+"@"+dg) {
			t.Errorf("lock lacks %s", rt)
		}
	}
	tmpl := read(t, filepath.Join(dir, "sandbox", "template.yaml"))
	if !strings.Contains(tmpl, "image: "+host+"/alpine/git:2.45@"+d["alpine/git:2.45"]+"   # fetch the workspace\n") {
		t.Errorf("comment or layout lost:\n%s", tmpl)
	}
	before := map[string]string{}
	for _, f := range []string{"sandbox/template.yaml", "rollouts/analysis.yaml", "ci/workflow.yaml", "ml/rayjob.yaml", "custom/runner.yaml"} {
		before[f] = read(t, filepath.Join(dir, f))
	}
	r = run(t, dir, "pin", "--write", ".")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "nothing to change: all 9 references pinned by digest\n") {
		t.Fatalf("second pin: %+v", r)
	}
	r = run(t, dir, "lint", ".")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "\nall 9 pinned by digest\n") {
		t.Fatalf("lint after: %+v", r)
	}

	// Hermetic: the registry is gone; the lock answers for every reference.
	srv.Close()
	if r := run(t, dir, "pin", "--write", "--refresh", "--hermetic", "--lock", "images.lock", "."); r.code != 0 {
		t.Fatalf("hermetic refresh: %+v", r)
	}
	for f, b := range before {
		if read(t, filepath.Join(dir, f)) != b {
			t.Errorf("%s changed by the second or hermetic run", f)
		}
	}
	os.WriteFile(filepath.Join(dir, "ml", "new.yaml"), []byte("apiVersion: ray.io/v1\nkind: RayCluster\nspec:\n  headGroupSpec:\n    template:\n      spec:\n        containers: [{image: "+host+"/ray:2.42}]\n"), 0o644)
	r = run(t, dir, "pin", "--write", "--hermetic", "--lock", "images.lock", ".")
	if r.code != 1 || !strings.Contains(r.stderr, "ml/new.yaml:7:30: "+host+"/ray:2.42") || !strings.Contains(r.stderr, "not in lock") {
		t.Fatalf("hermetic missing: %+v", r)
	}
}

// TestPinLeavesPlaceholders: template placeholders are named, left as
// written, and reported by lint as placeholders.
func TestPinLeavesPlaceholders(t *testing.T) {
	_, host, d := registryWith(t, "golang:1.26")
	task := "apiVersion: tekton.dev/v1\nkind: Task\nspec:\n  steps:\n  - {name: a, image: $(params.builder)}\n  - {name: b, image: " + host + "/golang:1.26}\n"
	dir := writeTree(t, map[string]string{"task.yaml": task})
	r := run(t, dir, "pin", "--write", ".")
	want := strings.Replace(task, host+"/golang:1.26", host+"/golang:1.26@"+d["golang:1.26"], 1)
	if r.code != 0 || read(t, filepath.Join(dir, "task.yaml")) != want || !strings.Contains(r.stderr, "left as written: 1 placeholder (") {
		t.Fatalf("pin: %+v", r)
	}
	r = run(t, dir, "lint", ".")
	if r.code != 1 || r.stdout != "task.yaml:5:22: $(params.builder): placeholder, not a reference: substituted before deploy, so not checked here; pin the value it is given\n" ||
		!strings.Contains(r.stderr, "1 pinned by digest, 1 placeholder (") {
		t.Fatalf("lint: %+v", r)
	}
	r = run(t, dir, "pin", ".")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "nothing to change: 1 reference pinned by digest\n") || !strings.Contains(r.stderr, "\nleft as written: 1 placeholder (") {
		t.Fatalf("pin again: %+v", r)
	}
}
