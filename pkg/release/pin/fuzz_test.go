package pin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

// fuzzResolver answers every tag with a digest derived from the reference.
func fuzzResolver() resolve.Resolver {
	return resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		return ref.PinOf(r, fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(r.Canonical()))), ref.Origin{Source: ref.SourceRegistry}), nil
	})
}

func addSeeds(f *testing.F, glob string) {
	paths, _ := filepath.Glob(glob)
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, strings.Contains(p, "ustomization"))
		}
	}
}

// FuzzFind feeds arbitrary bytes as a YAML file: Find must never panic, every
// site it locates must be where its line and column say, every image a
// separate walk of the same bytes expects (checkShapes) must be a site, and
// pinning must either fail with a named error or produce a file that parses
// to the same sites, that a second run leaves alone.
func FuzzFind(f *testing.F) {
	addSeeds(f, "testdata/rewrite/*/in/*")
	addSeeds(f, "testdata/rewrite/*/in/*/*")
	for _, s := range []string{
		billionLaughs(), listBomb(), nestedLists(20),
		"kind: Pod\nspec: {containers: [{image: &a 'x:1'}, {image: *a}, {<<: {image: \"y:2\"}}]}\n",
		"kind: Kustomization\nimages: [{name: a, newTag: b}, {name: c, newTag: d, digest: ''}]\n",
		"kind: Pod\r\nspec:\r\n  containers:\r\n  - image: !!str\r\n      # c\r\n      a:1\r\n",
		"kind: Pod\nspec:\n  containers:\n  - image: |\n      a:1\n",
		"kind: SandboxTemplate\nspec: {podTemplate: {spec: {initContainers: [{image: a}]}}}\n",
		"kind: Step\nspec: {images: [a, 'b', \"c\"]}\n",
		"\xef\xbb\xbfkind: Pod\u2028spec: {containers: [{image: a\u0085}]}",
		"apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nspec: {podTemplate: {spec: {containers: [{image: busybox}]}}}\n",
		"apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec:\n  templates:\n  - container: {image: 'a:1'}\n    script: {image: b}\n    sidecars: [{image: c}]\n",
		"apiVersion: tekton.dev/v1\nkind: Task\nspec:\n  stepTemplate: {image: a}\n  steps: [{image: $(params.x)}, {image: '${Y}'}]\n",
		"kind: PyTorchJob\napiVersion: kubeflow.org/v1\nspec: {pytorchReplicaSpecs: {Master: {template: {spec: {containers: [{image: a}]}}}}}\n",
		"kind: X\nspec: {deep: {containers: [{image: a}], initContainers: *c}, c: &c [{image: b}], image: 'c:1', skip: {image: d}}\n",
		"services: {web: {image: nginx}}\n---\n- image: a\n- {containers: [{image: b}]}\n",
		"kind: FooList\nitems: {image: a}\n---\nkind: List\nitems: [{kind: Bar, image: b}, [{image: c}]]\n",
		"kind: X\nmetadata: {annotations: {image: a}}\nspec: {<<: {image: b}, image: !!str c, other: !x d}\n",
	} {
		f.Add([]byte(s), false)
	}
	cfg := Config{
		Fields:   []FieldSpec{{Kind: "Step", Path: "spec.images[]"}, {Kind: "Step", Path: "spec.image"}},
		PodSpecs: []FieldSpec{{Kind: "SandboxTemplate", Path: "spec.podTemplate.spec"}},
		Exclude:  []Exclude{{Kind: "X", Path: "spec.skip"}, {FoundBy: ByImageKey, Path: "metadata"}},
	}
	f.Fuzz(func(t *testing.T, data []byte, kustomization bool) {
		name := "x.yaml"
		if kustomization {
			name = "kustomization.yaml"
		}
		o := options{maxFileSize: DefaultMaxFileSize, aliasBudget: defaultAliasBudget}
		if err := WithConfig(cfg)(&o); err != nil {
			t.Fatal(err)
		}
		file, err := parse(name, data, &o)
		if err != nil {
			if !errors.Is(err, ErrInput) || !strings.HasPrefix(err.Error(), name+":") {
				t.Fatalf("error without family or file: %v", err)
			}
			return
		}
		for i, s := range file.Sites {
			if s.Line < 1 || s.Col < 1 || s.File != name {
				t.Fatalf("bad position %+v", s)
			}
			tg := file.targets[i]
			if tg.entryNodes != nil {
				continue
			}
			sp := tg.img.span
			if tg.img.why != spliceable {
				continue // Plan refuses it, if it must change it
			}
			off, ok := file.src.lines.offset(s.Line, s.Col)
			if !ok || off != sp.start {
				t.Fatalf("%s: line:col is byte %d (%v), the scalar is at %d", s.Pos(), off, ok, sp.start)
			}
			text := string(data[sp.start:sp.end])
			if sp.quote != 0 {
				text = text[1 : len(text)-1]
			}
			if text != s.Value {
				t.Fatalf("%s: spliced text %q, value %q", s.Pos(), text, s.Value)
			}
		}
		checkShapes(t, file, data)
		tree := &Tree{Files: []*File{file}, opts: o}
		res, err := Plan(context.Background(), tree, fuzzResolver())
		if err != nil {
			if !errors.Is(err, ErrUnpinnable) && !errors.Is(err, ErrRewrite) {
				t.Fatalf("plan error without family: %v", err)
			}
			return
		}
		sameAsCheckAll(t, tree, fuzzResolver(), res)
		again, err := parse(name, res.Files[0].Data, &o)
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		res2, err := Plan(context.Background(), &Tree{Files: []*File{again}, opts: o}, fuzzResolver())
		if err != nil {
			t.Fatalf("second plan: %v", err)
		}
		if fr := res2.Files[0]; fr.Status != Unchanged {
			t.Fatalf("second plan changes %+v\n%q", fr.Changes, res.Files[0].Data)
		}
	})
}

// FuzzLoadConfig: the PinConfig decoder never panics and names the file.
func FuzzLoadConfig(f *testing.F) {
	addSeeds(f, "testdata/rewrite/*/pinconfig.yaml")
	f.Add([]byte("apiVersion: slipway.dev/v1alpha1\nkind: PinConfig\nfields: [{kind: X, path: 'a[].b'}]\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, _ bool) {
		cfg, err := parseConfig("c.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "c.yaml") || !(errors.Is(err, ErrConfig) || errors.Is(err, ErrInput)) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("loaded config does not validate: %v", err)
		}
	})
}

// checkShapes decodes data again and walks every node as written, without
// the locator's rules, expecting a site at every scalar the shape rules
// name: the image of every object of a containers, initContainers or
// ephemeralContainers list, and every other string value of a key image
// that parses as a reference or is a placeholder.
func checkShapes(t *testing.T, file *File, data []byte) {
	t.Helper()
	type pos struct{ line, col int }
	have := map[pos]bool{}
	for _, tg := range file.targets {
		if tg.entryNodes == nil {
			have[pos{int(tg.img.line), int(tg.img.col)}] = true
		}
	}
	var want []pos
	deref := func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			return n.Alias
		}
		return n
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			for _, c := range n.Content {
				walk(c)
			}
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], deref(n.Content[i+1])
			if k.Kind == yaml.ScalarNode && k.Value == "image" && k.ShortTag() == "!!str" && v.Kind == yaml.ScalarNode &&
				v.ShortTag() == "!!str" && v.Value != "" {
				if _, err := ref.Parse(v.Value); err == nil || placeholder(v.Value) != "" {
					want = append(want, pos{v.Line, v.Column})
				}
			}
			if k.Kind == yaml.ScalarNode && isContainerList(k.Value) && v.Kind == yaml.SequenceNode {
				for _, c := range v.Content {
					c = deref(c)
					if c.Kind != yaml.MappingNode {
						continue
					}
					for j := 0; j+1 < len(c.Content); j += 2 {
						ck, cv := c.Content[j], deref(c.Content[j+1])
						if ck.Kind == yaml.ScalarNode && ck.Value == "image" && ck.ShortTag() == "!!str" &&
							cv.Kind == yaml.ScalarNode && cv.ShortTag() != "!!null" {
							want = append(want, pos{cv.Line, cv.Column})
						}
					}
				}
			}
			walk(n.Content[i+1])
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := decode(dec, &doc); err != nil {
			break
		}
		walk(&doc)
	}
	for _, p := range want {
		if !have[p] {
			t.Fatalf("no site for the image at %d:%d; sites %+v", p.line, p.col, file.Sites)
		}
	}
}
