package pin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

func findDir(t *testing.T, dir string, opts ...Option) *Tree {
	t.Helper()
	tree, err := Find(context.Background(), []string{dir}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestPlanFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.yaml":             "kind: Pod\nspec:\n  containers:\n  - image: nginx:1.25\n",
		"b.yaml":             "kind: Pod\nspec:\n  containers:\n  - image: missing:1\n  - image: nginx:1.25\n  - image: \"Not_A/Ref::\"\n",
		"kustomization.yaml": "images:\n- name: nginx\n  newName: other\n",
	}
	writeFiles(t, dir, files)
	tr := newTableResolver(t, testTable())
	_, err := pinTree(t, dir, tr.resolver(), nil)
	if err == nil {
		t.Fatal("pin succeeded with a missing reference")
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(dir, "b.yaml") + ":4:12: missing:1: not found",
		filepath.Join(dir, "b.yaml") + ":6:12: Not_A/Ref::: cannot pin",
		filepath.Join(dir, "kustomization.yaml") + ":2:3: other: cannot pin: images entry has neither newTag nor digest: which tag?",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
	if !errors.Is(err, resolve.ErrNotFound) || !errors.Is(err, ErrUnpinnable) {
		t.Errorf("error families lost: %v", err)
	}
	if strings.Index(msg, "b.yaml:4:12") > strings.Index(msg, "b.yaml:6:12") {
		t.Errorf("failures not sorted:\n%s", msg)
	}
	if got := readTree(t, dir); !equalMaps(got, files) {
		t.Errorf("files changed after a failed plan: %v", got)
	}
}

func TestPlanResolvesEachReferenceOnce(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": `kind: Pod
spec:
  containers:
  - image: nginx:1.25
  - image: docker.io/library/nginx:1.25
  - image: index.docker.io/library/nginx:1.25
  - image: busybox:1.36@sha256:00000000000000000000000000000000000000000000000000000000000000ff
`,
		"b.yaml": "kind: Job\nspec: {template: {spec: {containers: [{image: nginx:1.25}]}}}\n",
	})
	for _, refresh := range []bool{false, true} {
		t.Run(fmt.Sprint("refresh=", refresh), func(t *testing.T) {
			tr := newTableResolver(t, testTable())
			var opts []PlanOption
			if refresh {
				opts = append(opts, WithRefresh())
			}
			res, err := Plan(context.Background(), findDir(t, dir), tr.resolver(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			calls, total := tr.calls(), 0
			for _, n := range calls {
				total += n
			}
			want := 1
			if refresh {
				want = 2
				if calls["busybox:1.36"] != 1 {
					t.Errorf("refresh did not resolve the pinned reference by its tag: %v", calls)
				}
			}
			if total != want {
				t.Errorf("resolver calls %v, want %d in all", calls, want)
			}
			if len(res.Pins) != want {
				t.Errorf("pins %v", res.Pins)
			}
			changes := res.Changes()
			if len(changes) != 4+(want-1) {
				t.Errorf("changes %+v", changes)
			}
			for _, c := range changes {
				if c.From == "docker.io/library/nginx:1.25" && c.To != "docker.io/library/nginx:1.25@"+dg(1) {
					t.Errorf("spelling not kept: %+v", c)
				}
			}
		})
	}
}

func TestPlanConcurrencyBound(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("kind: Pod\nspec:\n  containers:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "  - image: app-%d:v1\n", i)
	}
	writeFiles(t, dir, map[string]string{"a.yaml": b.String()})
	var inFlight, peak atomic.Int32
	r := resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		return ref.PinOf(r, dg(len(r.Written())), ref.Origin{Source: ref.SourceRegistry}), nil
	})
	var seen []Progress // WithProgress: called one at a time
	res, err := Plan(context.Background(), findDir(t, dir), r, WithConcurrency(3), WithProgress(func(p Progress) { seen = append(seen, p) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 21 || seen[0] != (Progress{Total: 20}) || seen[20].Resolved != 20 || seen[20].Total != 20 || !strings.HasPrefix(seen[20].Last, "app-") {
		t.Errorf("progress: %+v", seen)
	}
	for i, p := range seen {
		if p.Resolved != i {
			t.Errorf("progress %d says %d resolved", i, p.Resolved)
		}
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak in flight %d, want 2..3", p)
	}
	if len(res.Changes()) != 20 {
		t.Errorf("%d changes", len(res.Changes()))
	}
	if _, err := Plan(context.Background(), findDir(t, dir), r, WithConcurrency(0)); !errors.Is(err, ErrConfig) {
		t.Errorf("concurrency 0: %v", err)
	}
}

func TestPlanRefusesUnsafeRewrites(t *testing.T) {
	cases := []struct {
		name, yaml, pos string
	}{
		{"folded block scalar", "kind: Pod\nspec:\n  containers:\n  - image: >-\n      nginx:1.25\n", "x.yaml:4:12"},
		{"escape in double quotes", "kind: Pod\nspec:\n  containers:\n  - image: \"nginx:1.2\\x35\"\n", "x.yaml:4:12"},
		{"empty digest key in kustomization", "kind: Kustomization\nimages:\n- name: nginx\n  newTag: \"1.25\"\n  digest:\n", "x.yaml:3:3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"x.yaml": tc.yaml})
			tree := findDir(t, dir)
			if len(tree.Sites()) != 1 {
				t.Fatalf("sites %+v", tree.Sites())
			}
			_, err := Plan(context.Background(), tree, newTableResolver(t, testTable()).resolver())
			if !errors.Is(err, ErrRewrite) || !strings.Contains(err.Error(), tc.pos) {
				t.Errorf("got %v, want ErrRewrite at %s", err, tc.pos)
			}
			if len(Lint(tree)) != 1 {
				t.Errorf("lint still reports the site: %v", Lint(tree))
			}
		})
	}
	// A block scalar already pinned needs no rewrite and is no error.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"x.yaml": "kind: Pod\nspec:\n  containers:\n  - image: >-\n      nginx@" + dg(1) + "\n"})
	if _, err := Plan(context.Background(), findDir(t, dir), newTableResolver(t, nil).resolver()); err != nil {
		t.Error(err)
	}
}

func TestPlanRefusesBadResolverAnswers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"x.yaml": "kind: Pod\nspec: {containers: [{image: nginx:1.25}]}\n"})
	r := resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		return ref.Pin{Name: r.Written(), Digest: "sha256:nothex"}, nil
	})
	if _, err := Plan(context.Background(), findDir(t, dir), r); !errors.Is(err, ErrUnpinnable) {
		t.Errorf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Plan(ctx, findDir(t, dir), newTableResolver(t, testTable()).resolver()); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestPlanKeepsLineEndings(t *testing.T) {
	dir := t.TempDir()
	in := "kind: Kustomization\r\nimages:\r\n- name: nginx\r\n  newTag: \"1.25\"" // no final line break
	writeFiles(t, dir, map[string]string{
		"kustomization.yaml": in,
		"pod.yaml":           bomUTF8 + "kind: Pod\r\nspec:\r\n  containers:\r\n  - image: nginx:1.25 # c\r\n",
	})
	if _, err := pinTree(t, dir, newTableResolver(t, testTable()).resolver(), nil); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dir)
	if want := in + "\r\n  digest: " + dg(1); got["kustomization.yaml"] != want {
		t.Errorf("got %q\nwant %q", got["kustomization.yaml"], want)
	}
	if want := bomUTF8 + "kind: Pod\r\nspec:\r\n  containers:\r\n  - image: nginx:1.25@" + dg(1) + " # c\r\n"; got["pod.yaml"] != want {
		t.Errorf("got %q\nwant %q", got["pod.yaml"], want)
	}
}

func TestWriteAllOrNothing(t *testing.T) {
	setup := func(t *testing.T) (string, *Result, map[string]string) {
		dir := t.TempDir()
		files := map[string]string{
			"a.yaml": "kind: Pod\nspec: {containers: [{image: nginx:1.25}]}\n",
			"b.yaml": "kind: Pod\nspec: {containers: [{image: redis:7}]}\n",
		}
		writeFiles(t, dir, files)
		if err := os.Chmod(filepath.Join(dir, "a.yaml"), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := Plan(context.Background(), findDir(t, dir), newTableResolver(t, testTable()).resolver())
		if err != nil {
			t.Fatal(err)
		}
		return dir, res, files
	}
	t.Run("temp write fails", func(t *testing.T) {
		dir, res, files := setup(t)
		// Called concurrently: fail b.yaml's temporary file, whatever the order.
		res.createTemp = func(d, pattern string) (*os.File, error) {
			if strings.Contains(pattern, "b.yaml") {
				return nil, errors.New("disk full")
			}
			return os.CreateTemp(d, pattern)
		}
		if err := res.Write(); err == nil || !strings.Contains(err.Error(), "b.yaml: disk full") {
			t.Fatalf("got %v", err)
		}
		if got := readTree(t, dir); !equalMaps(got, files) {
			t.Errorf("written or temp left behind: %v", keys(got))
		}
	})
	t.Run("file changed since read", func(t *testing.T) {
		dir, res, files := setup(t)
		files["b.yaml"] = "# edited meanwhile\n" + files["b.yaml"]
		writeFiles(t, dir, map[string]string{"b.yaml": files["b.yaml"]})
		if err := res.Write(); !errors.Is(err, ErrRewrite) {
			t.Fatalf("got %v", err)
		}
		if got := readTree(t, dir); !equalMaps(got, files) {
			t.Errorf("written or temp left behind: %v", keys(got))
		}
	})
	t.Run("twice", func(t *testing.T) {
		dir, res, _ := setup(t)
		for range 2 {
			if err := res.Write(); err != nil {
				t.Fatal(err)
			}
		}
		got := readTree(t, dir)
		if !strings.Contains(got["a.yaml"], "nginx:1.25@"+dg(1)) || !strings.Contains(got["b.yaml"], "redis:7@"+dg(8)) || len(got) != 2 {
			t.Errorf("got %v", got)
		}
		if fi, err := os.Stat(filepath.Join(dir, "a.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode not kept: %v %v", fi.Mode(), err)
		}
	})
}
