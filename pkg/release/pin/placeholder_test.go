package pin

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

func TestKustomizeNameMatches(t *testing.T) {
	for _, tc := range []struct {
		image, name string
		want        bool
	}{
		{"runner", "runner", true},
		{"runner:0.1", "runner", true},
		{"runner@sha256:" + strings.Repeat("a", 64), "runner", true},
		{"runner:0.1@sha256:" + strings.Repeat("a", 64), "runner", true},
		{"runner:", "runner", true},
		{"host:5000/team/runner:1", "host:5000/team/runner", true},
		{"host:5000/team/runner", "host", false},
		{"docker.io/library/runner", "runner", false}, // no normalisation: the name as written
		{"runner", "docker.io/library/runner", false},
		{"example.com/runner:1", "runner", false},
		{"runner-x:1", "runner", false},
		{"runnerx", "runner", false},
		{"xrunner", "runner", false},
		{"runner/sub:1", "runner", false},
		{"runner:bad tag", "runner", false},
		{"r.nner", "r.nner", true},
		{"runner", "r.nner", false}, // kustomize reads name as a regular expression; pin reads it as written
		{"runner", "", false},
	} {
		if got := kustomizeNameMatches(tc.image, tc.name); got != tc.want {
			t.Errorf("kustomizeNameMatches(%q, %q) = %v, want %v", tc.image, tc.name, got, tc.want)
		}
	}
}

// onlyHost is a transport that lets requests to host through and refuses, and
// records, every other request: a placeholder resolved as a public image
// would go to index.docker.io.
type onlyHost struct {
	host  string
	mu    sync.Mutex
	other []string
}

func (o *onlyHost) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != o.host {
		o.mu.Lock()
		o.other = append(o.other, req.URL.String())
		o.mu.Unlock()
		return nil, fmt.Errorf("test transport: unexpected request to %s", req.URL.Host)
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (o *onlyHost) unexpected() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.other)
}

// TestPinLeavesKustomizePlaceholders is the case of the issue: a
// kustomization renames the placeholder runner to the real image in a
// registry that holds only that image. Pin resolves the entry and never
// asks for runner (docker.io/library/runner:latest), in one kustomization
// and through an overlay of a base.
func TestPinLeavesKustomizePlaceholders(t *testing.T) {
	host := registrytest.NewInProcess(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	digest := registrytest.Push(t, host+"/platform/runner:0.9.1", img).DigestStr()

	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: runner}\nspec:\n  template:\n    spec:\n      containers:\n      - name: runner\n        image: runner\n"
	entry := "images:\n- name: runner\n  newName: " + host + "/platform/runner\n  newTag: \"0.9.1\"\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		kust  string // the kustomization that gets the digest
		res   string // the resource that keeps its placeholder
	}{
		{
			name: "same kustomization",
			files: map[string]string{
				"kustomization.yaml": "resources:\n- deployment.yaml\n" + entry,
				"deployment.yaml":    deployment,
			},
			kust: "kustomization.yaml", res: "deployment.yaml",
		},
		{
			name: "overlay renames an image of its base",
			files: map[string]string{
				"base/kustomization.yaml":          "resources:\n- deployment.yaml\n",
				"base/deployment.yaml":             deployment,
				"overlays/prod/kustomization.yaml": "resources:\n- ../../base\n" + entry,
			},
			kust: "overlays/prod/kustomization.yaml", res: "base/deployment.yaml",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			guard := &onlyHost{host: host}
			r, err := resolve.NewRegistry(resolve.WithKeychain(authn.NewMultiKeychain()), resolve.WithTransport(guard),
				resolve.WithRetry(resolve.RetryPolicy{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond, MaxRetryAfter: time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			tree := findDir(t, dir)
			for _, s := range tree.Sites() {
				if s.Value == "runner" && s.RenamedBy != filepath.Join(dir, tc.kust)+":4:3" {
					t.Errorf("%s: renamed by %q, want the entry of %s", s.Pos(), s.RenamedBy, tc.kust)
				}
			}
			res, err := Plan(context.Background(), tree, r)
			if err != nil {
				t.Fatalf("pin: %v", err)
			}
			if err := res.Write(); err != nil {
				t.Fatal(err)
			}
			if u := guard.unexpected(); len(u) > 0 {
				t.Errorf("pin asked a registry it had no business with: %v", u)
			}
			got := readTree(t, dir)
			if want := strings.Replace(tc.files[tc.kust], "newTag: \"0.9.1\"\n", "newTag: \"0.9.1\"\n  digest: "+digest+"\n", 1); got[tc.kust] != want {
				t.Errorf("%s:\n%s\nwant\n%s", tc.kust, got[tc.kust], want)
			}
			if got[tc.res] != deployment {
				t.Errorf("the placeholder was rewritten:\n%s", got[tc.res])
			}
			if len(res.Pins) != 1 || res.Pins[0].String() != host+"/platform/runner:0.9.1@"+digest {
				t.Errorf("pins %v", res.Pins)
			}
			if f := Lint(findDir(t, dir)); len(f) != 0 {
				t.Errorf("lint after pin: %v", f)
			}
		})
	}
}

// TestPlaceholdersSeenThroughTheTreeOnly: a base pinned on its own, without
// the overlay that renames its image, has no kustomization that says runner
// is a placeholder: runner is then the image it names (and lint says so).
// Pin the tree that holds the overlays.
func TestPlaceholdersSeenThroughTheTreeOnly(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"base/kustomization.yaml":          "resources:\n- deployment.yaml\n",
		"base/deployment.yaml":             "kind: Pod\nspec:\n  containers:\n  - image: runner\n",
		"overlays/prod/kustomization.yaml": "resources:\n- ../../base\nimages:\n- name: runner\n  newName: nginx\n  newTag: \"1.25\"\n",
	})
	if f := Lint(findDir(t, dir)); len(f) != 1 || f[0].Ref != "nginx:1.25" || f[0].Reason != ReasonKustomize {
		t.Errorf("lint of the whole tree: %v", f)
	}
	base := filepath.Join(dir, "base")
	f := Lint(findDir(t, base))
	if len(f) != 1 || f[0].Ref != "runner" || f[0].Reason != ReasonNoTag {
		t.Errorf("lint of the base alone: %v", f)
	}
	tr := newTableResolver(t, testTable())
	if _, err := Plan(context.Background(), findDir(t, base), tr.resolver()); err == nil || !strings.Contains(err.Error(), "deployment.yaml:4:12: runner: not found") {
		t.Errorf("pin of the base alone: %v", err)
	}
}

// TestLintPlaceholders lints the tree of the placeholders golden case:
// the images entries are reported, the placeholders they rename are not.
func TestLintPlaceholders(t *testing.T) {
	dir := filepath.Join("testdata", "rewrite", "placeholders", "in")
	var got []string
	for _, f := range Lint(findDir(t, dir)) {
		rel, _ := filepath.Rel(dir, f.File)
		got = append(got, fmt.Sprintf("%s:%d %s %s", filepath.ToSlash(rel), f.Line, f.Ref, f.Reason))
	}
	want := []string{
		"agent/base/kustomization.yaml:8 redis:7 " + ReasonKustomize,
		"agent/overlay/kustomization.yaml:4 ghcr.io/example/sidecar:latest " + ReasonKustomize,
		"app/kustomization.yaml:4 nginx:1.25 " + ReasonKustomize,
		"app/pod.yaml:12 docker.io/library/nginx:1.25 " + ReasonTag,
		"app/pod.yaml:14 nginx-exporter:1 " + ReasonTag,
		"app/pod.yaml:16 postgres:16 " + ReasonTag,
		"base/deployment.yaml:15 busybox:1.36 " + ReasonTag,
		"base/deployment.yaml:17 registry.example.com:5000/team/migrate:v7 " + ReasonTag,
		"components/debug/debug.yaml:10 alpine:3.20 " + ReasonTag,
		"overlays/prod/kustomization.yaml:10 registry.example.com:5000/platform/runner:0.9.1 " + ReasonKustomize,
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
