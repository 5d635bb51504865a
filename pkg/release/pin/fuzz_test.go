package pin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
// site it locates must be where its line and column say, and pinning must
// either fail with a named error or produce a file that parses to the same
// sites, that a second run leaves alone.
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
	} {
		f.Add([]byte(s), false)
	}
	cfg := Config{
		Fields:   []FieldSpec{{Kind: "Step", Path: "spec.images[]"}, {Kind: "Step", Path: "spec.image"}},
		PodSpecs: []FieldSpec{{Kind: "SandboxTemplate", Path: "spec.podTemplate.spec"}},
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
			img := file.targets[i].image
			if img == nil {
				continue
			}
			sp, err := file.src.locate(img)
			if err != nil {
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
		tree := &Tree{Files: []*File{file}, opts: o}
		res, err := Plan(context.Background(), tree, fuzzResolver())
		if err != nil {
			if !errors.Is(err, ErrUnpinnable) && !errors.Is(err, ErrRewrite) {
				t.Fatalf("plan error without family: %v", err)
			}
			return
		}
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
