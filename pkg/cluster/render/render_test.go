package render_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

const kustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: sandboxes
labels:
  - pairs:
      team: agents
resources:
  - namespace.yaml
  - config.yaml
images:
  - name: slipway/runner
    newName: registry.example/platform/runner
    digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
`

// goldenTree is a pool with four generations (retained, draining,
// active, warming) of fixed digests, its own kustomization with a
// namespace, a label and two resources, a node-image label and an
// allow-list.
func goldenTree(t *testing.T) files {
	d := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	var gens []*generation.Generation
	for i, c := range []byte("abcd") {
		gens = append(gens, gen(t, "agents", i+1, "registry.example/platform/control-plane@"+d(c),
			"registry.example/platform/runner@"+d(c+1), "registry.example/templates/tools@"+d(c+2)))
	}
	f := files{
		pool.KustomizationFile("agents"):   kustomization,
		"pools/agents/namespace.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sandboxes\n",
		"pools/agents/config.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: agents-settings\ndata:\n  level: info\n",
		"pools/agents/evidence/x/y/z.json": "{not kustomize input}",
		"README.md":                        "config repository\n",
	}
	addPool(t, f, "agents", "  kubernetes:\n    nodeImageLabel: slipway.dev/node-image\n", gens,
		[]string{pool.Retained, pool.Draining, pool.Active, pool.Warming})
	f[pool.PoolFile("agents")] = strings.Replace(f[pool.PoolFile("agents")], "network:\n    mode: deny",
		"network:\n    mode: allow-list\n    allow: [\"10.0.0.0/8:443\", \"192.0.2.7:8080\", \"[2001:db8::/32]:443\"]", 1)
	return f
}

func TestGolden(t *testing.T) {
	tree, rev, _ := commit(t, goldenTree(t))
	ctx := context.Background()
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	again, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.YAML, again.YAML) {
		t.Fatal("two renders of one tree differ")
	}
	got := bytes.ReplaceAll(res.YAML, []byte(rev), []byte("REVISION"))
	file := filepath.Join("testdata", "golden.yaml")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("render differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", file, got)
	}
	if n := len(res.Generations); n != 4 || res.Generations[0].WarmPool != "" || res.Generations[1].WarmPool != "" ||
		res.Generations[2].WarmPool == "" || res.Generations[3].WarmPool == "" {
		t.Fatalf("generations = %+v", res.Generations)
	}
	// Argo CD applies a generation's template before its warm pool, and
	// prunes nothing of a generation while it is in desired.yaml (its
	// objects are in the render until gc takes it out when its windows
	// close): no Prune=false that would outlive the window on the live
	// objects.
	if n, m := bytes.Count(got, []byte(kubeobjects.AnnotationSyncWave+": '1'")), bytes.Count(got, []byte(kubeobjects.AnnotationSyncWave+": '2'")); n != 4 || m != 2 {
		t.Errorf("sync waves: %d templates in wave 1, %d warm pools in wave 2", n, m)
	}
	for _, bad := range []string{"Recreate", "evidence", "not kustomize input", "Prune=false"} {
		if bytes.Contains(got, []byte(bad)) {
			t.Errorf("render holds %q", bad)
		}
	}
}

func TestVerifiedAndCached(t *testing.T) {
	w := newWorld(t)
	f := files{}
	w.policy(f)
	var gens []*generation.Generation
	for i := range 3 {
		gens = append(gens, gen(t, "agents", i+1, w.image(t, "platform/control-plane", "cp"+string(rune('a'+i)), w.release),
			w.image(t, "platform/runner", "runner", w.release), w.image(t, "templates/tools", "tools"+string(rune('a'+i)), w.release)))
	}
	addPool(t, f, "agents", "", gens, []string{pool.Draining, pool.Active, pool.Warming})
	tree, rev, _ := commit(t, f)
	cache := policy.NewCache()
	ctx := context.Background()
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithVerifyCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	if res.Policy == "" || !bytes.Contains(res.YAML, []byte(gens[2].Pins[generation.WorkspaceTemplate].Image)) {
		t.Fatalf("policy %q, yaml:\n%s", res.Policy, res.YAML)
	}
	hits, misses := cache.Stats()
	if hits != 2 || misses != 7 || cache.Len() != 7 { // the three generations share one runner image
		t.Fatalf("cold cache: hits %d misses %d len %d", hits, misses, cache.Len())
	}
	again, err := render.Pool(ctx, tree, "agents", rev, render.WithVerifyCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ = cache.Stats(); hits != 2+9 || !bytes.Equal(res.YAML, again.YAML) {
		t.Fatalf("warm cache: hits %d, same bytes %v", hits, bytes.Equal(res.YAML, again.YAML))
	}
	// No policy in the tree, none given, not skipped: refused.
	delete(f, pool.PolicyPath)
	tree, rev, _ = commit(t, f)
	if _, err := render.Pool(ctx, tree, "agents", rev); err == nil || !strings.Contains(err.Error(), "holds no policies/verification.yaml") {
		t.Fatalf("no policy: err = %v", err)
	}
}

func TestNotVerifiedRendersNothing(t *testing.T) {
	w := newWorld(t)
	f := files{}
	w.policy(f)
	good := gen(t, "agents", 1, w.image(t, "platform/control-plane", "cp1", w.release),
		w.image(t, "platform/runner", "runner", w.release), w.image(t, "templates/tools", "tools1", w.release))
	rogueTmpl := w.image(t, "templates/tools", "tools2", w.rogue)
	bad := gen(t, "agents", 2, w.image(t, "platform/control-plane", "cp2", w.release),
		w.image(t, "platform/runner", "runner", w.release), rogueTmpl)
	addPool(t, f, "agents", "", []*generation.Generation{good, bad}, []string{pool.Active, pool.Warming})
	tree, rev, _ := commit(t, f)
	res, err := render.Pool(context.Background(), tree, "agents", rev)
	if res != nil || !errors.Is(err, render.ErrNotVerified) || !errors.Is(err, policy.ErrRefused) {
		t.Fatalf("res %v, err = %v", res, err)
	}
	msg := err.Error()
	for _, want := range []string{bad.ID, "workspaceTemplate", digestOf(rogueTmpl), "signature", "nothing rendered"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, good.ID) {
		t.Errorf("error names the verified generation:\n%s", msg)
	}
}

func TestRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(f files)
		want string
	}{
		"images entry overrides a pin": {func(f files) {
			f[pool.KustomizationFile("agents")] += "  - name: registry.example/templates/tools\n    newTag: latest\n"
		}, "pins are not overridable"},
		"patch removes the label": {func(f files) {
			f[pool.KustomizationFile("agents")] = strings.Replace(f[pool.KustomizationFile("agents")], "team: agents", "team: agents\n      slipway.dev/generation: other", 1)
		}, "changed its label slipway.dev/generation"},
		"domain in allow list": {func(f files) {
			f[pool.PoolFile("agents")] = strings.Replace(f[pool.PoolFile("agents")], "\"192.0.2.7:8080\"", "\"api.example.com:443\"", 1)
		}, `spec.network.allow[1]: cannot render: "api.example.com:443" names a host`},
		"weaker pod security": {func(f files) {
			f["pools/agents/namespace.yaml"] += "  labels:\n    pod-security.kubernetes.io/enforce: privileged\n"
		}, `Namespace sandboxes: cannot render: label pod-security.kubernetes.io/enforce=privileged, but Slipway's sandboxes run under Pod Security "restricted"`},
		"reserved file name": {func(f files) {
			f["pools/agents/"+render.GeneratedFile] = "{}\n"
		}, "the name is Slipway's"},
		"bad kustomization": {func(f files) {
			f[pool.KustomizationFile("agents")] += "resources: [missing.yaml]\n"
		}, "kustomize build pools/agents"},
	} {
		t.Run(name, func(t *testing.T) {
			f := goldenTree(t)
			tc.edit(f)
			tree, rev, _ := commit(t, f)
			_, err := render.Pool(context.Background(), tree, "agents", rev, render.WithInsecureSkipVerify())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
