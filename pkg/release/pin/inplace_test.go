package pin

import (
	"context"
	"testing"
)

func TestKeepsStructure(t *testing.T) {
	d := "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for s, want := range map[string]bool{
		"registry.example.com/app:v1" + d:    true,
		"app" + d:                            true,
		"localhost:5000/a/b:1.0" + d:         true,
		"registry.example.com/app:v1":        false, // no "@": not what Plan writes
		"-app" + d:                           false,
		".app" + d:                           false,
		"app" + d + "-":                      false,
		"@sha256:abc":                        false,
		"":                                   false,
		"a" + string(make([]byte, 1100)) + d: false,
	} {
		if got := keepsStructure(s); got != want {
			t.Errorf("keepsStructure(%.40q) = %v, want %v", s, got, want)
		}
	}
}

// TestPlanSplicesInPlace: a plain or quoted image of a known kind or a pod
// spec shape is spliced without parsing the file again; an anchored one, or
// one a config names, is checked; both give the bytes the check gives
// (pinTree compares them).
func TestPlanSplicesInPlace(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"plain.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: registry.example.com/app:v1 # the app\n  - image: 'registry.example.com/app:v2'\n",
		"anchor.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: &img registry.example.com/app:v1\n" +
			"  initContainers:\n  - image: *img\n",
		"flow.yaml": "kind: Runner\nspec: {pool: {containers: [{name: a, image: registry.example.com/app:v1}]}}\n",
	})
	tree, err := Find(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, f := range tree.Files {
		for i := range f.sites {
			w := wanted(f, i, false, newRefCache())
			if !w.ask {
				continue
			}
			_, e, err := change(w, "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false)
			if err != nil {
				t.Fatal(err)
			}
			checked[f.Path] = checked[f.Path] || !e.inPlace
		}
	}
	for name, want := range map[string]bool{"plain.yaml": false, "anchor.yaml": true, "flow.yaml": false} {
		if got := checked[dir+"/"+name]; got != want {
			t.Errorf("%s: checked %v, want %v", name, got, want)
		}
	}
	if _, err := pinTree(t, dir, fuzzResolver(), nil); err != nil {
		t.Fatal(err)
	}
}
