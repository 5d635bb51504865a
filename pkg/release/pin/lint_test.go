package pin

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml": `kind: Pod
spec:
  containers:
  - image: nginx
  - image: nginx:latest
  - image: nginx:1.25
  - image: nginx:1.25
    imagePullPolicy: Always
  - image: nginx:1.25@` + dg(1) + `
  - image: nginx@` + dg(1) + `
    imagePullPolicy: Always
  - image: "UPPER/case:1"
`,
		"a/kustomization.yaml": `images:
- name: web
  newTag: v1
- name: pinned
  newTag: v1
  digest: ` + dg(1) + `
- name: renamed
  newName: other
- newTag: v1
`,
	})
	tree := findDir(t, dir)
	var got []string
	for _, f := range Lint(tree) {
		rel, _ := filepath.Rel(dir, f.File)
		got = append(got, strings.TrimPrefix(f.String(), f.File+":")+" @"+rel)
	}
	want := []string{
		"2:3: web:v1: " + ReasonKustomize + " @a/kustomization.yaml",
		"7:3: other: " + ReasonKustomizeTag + " @a/kustomization.yaml",
		"9:3: :v1: " + ReasonMalformed + ": images entry has neither name nor newName @a/kustomization.yaml",
		"4:12: nginx: " + ReasonNoTag + " @b.yaml",
		"5:12: nginx:latest: " + ReasonLatest + " @b.yaml",
		"6:12: nginx:1.25: " + ReasonTag + " @b.yaml",
		"7:12: nginx:1.25: " + ReasonPullAlways + " @b.yaml",
	}
	if len(got) != len(want)+1 {
		t.Fatalf("findings:\n%s", strings.Join(got, "\n"))
	}
	if !reflect.DeepEqual(got[:len(want)], want) {
		t.Errorf("findings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if last := got[len(want)]; !strings.HasPrefix(last, "12:12: UPPER/case:1: "+ReasonMalformed+": ") {
		t.Errorf("malformed: %s", last)
	}
}
