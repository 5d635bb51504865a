package pin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFindRefusesBadYAML(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"mapping in scalar", "kind: Pod\nspec: x\n  containers: []\n", "bad.yaml:3: input refused: invalid yaml: mapping values are not allowed"},
		{"in a later document", "kind: Pod\n---\nkind: Pod\nspec: [\n", "bad.yaml:4: input refused: invalid yaml: did not find expected node content"},
		{"unknown anchor", "kind: Pod\n\nspec: *nope\n", "bad.yaml:3: input refused: invalid yaml: unknown anchor 'nope' referenced"},
		{"control character", "kind: Pod\nspec:\n  x: \x01\n", "bad.yaml:3: input refused: invalid yaml: control characters are not allowed"},
		{"not UTF-8", "kind: Pod\nspec:\n  x: \xff\n", "bad.yaml:3: input refused: not valid UTF-8"},
		{"UTF-16", "\xff\xfek\x00:\x00", "bad.yaml:1: input refused: not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"bad.yaml": tc.yaml, "good.yaml": "kind: Pod\n"})
			_, err := Find(context.Background(), []string{dir})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestFindSizeLimit(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"big.yaml": "kind: Pod\n# " + strings.Repeat("x", 100) + "\n"})
	_, err := Find(context.Background(), []string{dir}, WithMaxFileSize(64))
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), filepath.Join(dir, "big.yaml")+": input refused: 113 bytes, over the limit of 64") {
		t.Errorf("got %v", err)
	}
	writeFiles(t, dir, map[string]string{"big.yaml": strings.Repeat("#", int(DefaultMaxFileSize)+1)})
	if _, err := Find(context.Background(), []string{filepath.Join(dir, "big.yaml")}); !errors.Is(err, ErrInput) {
		t.Errorf("default limit: %v", err)
	}
	if _, err := Find(context.Background(), []string{dir}, WithMaxFileSize(0)); !errors.Is(err, ErrConfig) {
		t.Errorf("limit 0: %v", err)
	}
}

// billionLaughs is the classic: ten levels of ten aliases each, 10^9 nodes
// once expanded, here inside an annotation where no image is.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    a0: &a0 [lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "    a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}
	b.WriteString("spec: {containers: [{image: nginx:1.25}]}\n")
	return b.String()
}

// listBomb nests Lists whose items alias the level below: walking the items
// would visit 10^9 pods.
func listBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- &l0 {kind: Pod, spec: {containers: [{image: nginx:1.25}]}}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "- &l%d {kind: List, items: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 10), ","))
	}
	return b.String()
}

func TestFindRefusesAliasBombs(t *testing.T) {
	var deep strings.Builder
	deep.WriteString("kind: List\nitems:\n")
	for range 1200 {
		deep.WriteString("- kind: List\n  items:\n")
	}
	cases := []struct {
		name, yaml, want string
		opts             []Option
	}{
		{name: "billion laughs", yaml: billionLaughs(), want: "x.yaml:1: input refused: excessive aliasing"},
		{name: "list bomb", yaml: listBomb(), want: "x.yaml:1: input refused: excessive aliasing"},
		{name: "self reference", yaml: "kind: List\nitems:\n- &a {kind: List, items: [*a]}\n", want: "x.yaml:1: input refused: excessive aliasing: an alias refers to a node that contains it"},
		{
			name: "alias budget on a path",
			yaml: "kind: Pod\nspec:\n  containers: &c [{image: a:1}]\n  initContainers: *c\n  ephemeralContainers: *c\n",
			opts: []Option{withAliasBudget(-14)}, // the document's 15 nodes leave one hop
			want: "x.yaml:5:24: input refused: excessive aliasing",
		},
		{name: "lists nested too deep", yaml: nestedLists(maxDepth + 5), want: "input refused: nesting deeper than 1000 levels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"x.yaml": tc.yaml})
			start := time.Now()
			_, err := Find(context.Background(), []string{dir}, tc.opts...)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	// Aliases a walk follows within the budget are fine, and an anchored
	// image is one site.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"x.yaml": "kind: Pod\nspec:\n  containers: &c [{image: a:1}]\n  initContainers: *c\n"})
	if tree := findDir(t, dir); len(tree.Sites()) != 1 {
		t.Errorf("sites %+v", tree.Sites())
	}
}

func nestedLists(n int) string {
	return strings.Repeat("{kind: List, items: [", n) + "{kind: Pod}" + strings.Repeat("]}", n) + "\n"
}

func TestFindWalk(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "tree")
	pod := func(img string) string { return "kind: Pod\nspec: {containers: [{image: " + img + "}]}\n" }
	writeFiles(t, root, map[string]string{
		"outside.yaml":           pod("outside:1"),
		"outside-dir/x.yaml":     pod("outside-dir:1"),
		"tree/a.yaml":            pod("a:1"),
		"tree/sub/b.YML":         pod("b:1"),
		"tree/sub/Kustomization": "images:\n- name: k\n  newTag: v1\n",
		"tree/.git/c.yaml":       pod("hidden:1"),
		"tree/README.md":         pod("readme:1"),
		"tree/data.json":         "{}",
	})
	for link, to := range map[string]string{
		"tree/out.yaml":    "../outside.yaml",
		"tree/outdir":      filepath.Join(root, "outside-dir"),
		"tree/in.yaml":     "a.yaml",
		"tree/dangling":    "nowhere.yaml",
		"tree/sub/up.yaml": "../../outside.yaml",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Find(context.Background(), []string{tree})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range tr.Sites() {
		rel, _ := filepath.Rel(root, s.File)
		got = append(got, rel+" "+s.Value)
	}
	want := []string{"tree/a.yaml a:1", "tree/sub/Kustomization k:v1", "tree/sub/b.YML b:1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sites %q, want %q", got, want)
	}
	skipped := map[string]string{}
	for _, s := range tr.Skipped {
		rel, _ := filepath.Rel(root, s.Path)
		skipped[rel] = s.Reason
	}
	for link, reason := range map[string]string{
		"tree/out.yaml":    "symlink leaving the tree",
		"tree/outdir":      "symlink leaving the tree",
		"tree/sub/up.yaml": "symlink leaving the tree",
		"tree/in.yaml":     "symlink not followed",
		"tree/dangling":    "symlink not followed (its target cannot be resolved)",
	} {
		if !strings.HasPrefix(skipped[link], reason) {
			t.Errorf("%s: skipped as %q, want %q", link, skipped[link], reason)
		}
	}
	if skipped["tree/.git"] != "version control metadata, never walked" || len(skipped) != 6 {
		t.Errorf("skipped %v", skipped)
	}
	if !reflect.DeepEqual(tr.NotYAML, map[string]int{".md": 1, ".json": 1}) {
		t.Errorf("not YAML %v", tr.NotYAML)
	}

	// A symlink given explicitly is read as given, and written through:
	// the link stays a link.
	link := filepath.Join(tree, "out.yaml")
	if _, err := pinTree(t, link, newTableResolver(t, map[string]string{"outside:1": dg(1)}).resolver(), nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link replaced: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "outside.yaml")); !strings.Contains(string(b), "outside:1@"+dg(1)) {
		t.Errorf("target not pinned: %s", b)
	}

	// A file named twice, or through a directory and a path, is read once.
	tr, err = Find(context.Background(), []string{tree, filepath.Join(tree, "a.yaml"), filepath.Join(tree, "in.yaml")})
	if err != nil || len(tr.Files) != 3 {
		t.Errorf("files %d, err %v", len(tr.Files), err)
	}
	t.Chdir(tree)
	tr, err = Find(context.Background(), []string{".", "a.yaml", "./sub/../a.yaml", filepath.Join(tree, "a.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range tr.Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"a.yaml", filepath.Join("sub", "Kustomization"), filepath.Join("sub", "b.YML")}; strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Errorf("files %q, want %q", paths, want)
	}
	if _, err := Find(context.Background(), []string{filepath.Join(root, "missing")}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing path: %v", err)
	}
	if _, err := Find(context.Background(), nil); !errors.Is(err, ErrInput) {
		t.Errorf("no paths: %v", err)
	}
}
