package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"sigs.k8s.io/yaml"
)

// argocdCheckout is a config repository checked out in a directory, as
// Argo CD hands it to the plugin: pool agents with a verification policy
// trusting key ci, a generation whose images ci signed and one whose
// workspace template nobody signed. It returns the root and both.
func argocdCheckout(t *testing.T) (root string, signed, unsigned *generation.Generation, unsignedTmpl string) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1", "templates/tools:v2")
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", cliPassword)
	if r := run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(dir, "ci")); r.code != 0 {
		t.Fatal(r)
	}
	for _, rt := range []string{"platform/cp:v1", "platform/runner:v1", "templates/tools:v1"} {
		if r := run(t, "", "sign", img(rt), "--key", filepath.Join(dir, "ci.key"), "--offline-no-tlog"); r.code != 0 {
			t.Fatal(r)
		}
	}
	var gens []*generation.Generation
	for i, tmpl := range []string{"templates/tools:v1", "templates/tools:v2"} {
		out := filepath.Join(dir, "g"+string(rune('0'+i))+".yaml")
		args := []string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", out,
			"--pin", "controlPlane=" + img("platform/cp:v1"), "--pin", "runner=" + img("platform/runner:v1"),
			"--pin", "workspaceTemplate=" + img(tmpl), "--control-plane-protocol", "1", "--runner-protocol", "1"}
		if i > 0 {
			args = append(args, "--from", filepath.Join(dir, "g0.yaml"))
		}
		if r := run(t, "", args...); r.code != 0 {
			t.Fatal(r)
		}
		g, err := generation.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	pl, _ := pool.Marshal(pool.Default("agents"))
	files := map[string]string{
		pool.PoolFile("agents"): string(pl),
		pool.PolicyPath: `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: release}
spec:
  transparencyLog: none
  keys: [{name: ci, publicKeyFile: keys/ci.pub}]
  rules:
    - name: platform
      match: {kinds: [control-plane, runner, workspace-template]}
      signatures: {keys: [ci]}
`,
		"policies/keys/ci.pub": read(t, filepath.Join(dir, "ci.pub")),
	}
	for _, g := range gens {
		b, err := generation.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		files[pool.GenerationFile("agents", g.ID)] = string(b)
	}
	return writeTree(t, files), gens[0], gens[1], img("templates/tools:v2")
}

// setState writes the pool's desired.yaml with the given generations
// (the first active, the rest warming).
func setState(t *testing.T, root string, gens ...*generation.Generation) {
	t.Helper()
	st := pool.NewState("agents")
	for i, g := range gens {
		s := pool.Warming
		if i == 0 {
			s = pool.Active
		}
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: s, WarmSize: 2, Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
	}
	b, err := pool.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, pool.StateFile("agents")), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The config management plugin's generate and parameters, driven by Argo
// CD's environment in the application's source path: a verified pool
// renders the same bytes twice, stamped with ARGOCD_APP_REVISION; an
// unsigned generation is refused with nothing on stdout; an empty pool is
// an error unless allow-empty is set.
func TestArgoCDGenerate(t *testing.T) {
	root, signed, unsigned, unsignedTmpl := argocdCheckout(t)
	app := filepath.Join(root, "pools", "agents")
	rev := strings.Repeat("5e", 20)
	t.Setenv("ARGOCD_APP_NAME", "agents")
	t.Setenv("ARGOCD_APP_REVISION", rev)
	t.Setenv("ARGOCD_APP_SOURCE_PATH", "pools/agents")
	t.Setenv("ARGOCD_APP_PARAMETERS", `[{"name":"pool","string":"agents"}]`)

	cacheDir := filepath.Join(t.TempDir(), "verify")
	t.Setenv("SLIPWAY_VERIFY_CACHE_DIR", cacheDir)

	setState(t, root, signed)
	r := run(t, app, "argocd", "generate")
	if r.code != 0 || strings.Count(r.stdout, "kind: SandboxTemplate") != 1 || strings.Count(r.stdout, "kind: SandboxWarmPool") != 1 ||
		!strings.Contains(r.stdout, "slipway.dev/config-revision: "+rev) || !strings.Contains(r.stdout, "argocd.argoproj.io/sync-wave: '2'") {
		t.Fatalf("verified pool: %+v", r)
	}
	if again := run(t, app, "argocd", "generate"); again.code != 0 || again.stdout != r.stdout {
		t.Fatalf("second render differs: %+v", again)
	}
	// --output json: the same objects, in the same order, one JSON object
	// per line, as an independent YAML reader (sigs.k8s.io/yaml, which
	// kubectl uses) reads the YAML.
	j := run(t, app, "argocd", "generate", "--output", "json")
	lines := strings.Split(strings.TrimSuffix(j.stdout, "\n"), "\n")
	docs := strings.Split(r.stdout, "\n---\n")
	if j.code != 0 || len(lines) != len(docs) || len(lines) < 2 {
		t.Fatalf("--output json: %d lines for %d YAML documents: %+v", len(lines), len(docs), j)
	}
	for i, d := range docs {
		want, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if json.Unmarshal([]byte(lines[i]), &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("object %d as JSON:\n%s\nthe YAML read as JSON:\n%s", i, lines[i], want)
		}
	}
	if bad := run(t, app, "argocd", "generate", "--output", "xml"); bad.code != 2 || !strings.Contains(bad.stderr, `got "xml"`) || bad.stdout != "" {
		t.Errorf("--output xml: %+v", bad)
	}
	if kept, _ := filepath.Glob(filepath.Join(cacheDir, "*.json")); len(kept) != 3 {
		t.Fatalf("verification cache holds %d results, want 3 (one per pinned image): %v", len(kept), kept)
	}

	r = run(t, app, "argocd", "parameters")
	var ann []struct {
		Name, String, Tooltip string
		Required              bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ann) != nil || len(ann) != 3 || ann[0].Name != "pool" || !ann[0].Required ||
		ann[0].String != "agents" || !strings.Contains(ann[0].Tooltip, "this repository holds: agents") || ann[2].Name != "allow-empty" {
		t.Fatalf("parameters: %+v", r)
	}

	setState(t, root, signed, unsigned)
	r = run(t, app, "argocd", "generate")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("unsigned generation: %+v", r)
	}
	for _, want := range []string{unsigned.ID, "workspaceTemplate", unsignedTmpl[strings.Index(unsignedTmpl, "@")+1:], "signature", "nothing rendered"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, signed.ID) {
		t.Errorf("refusal names the verified generation:\n%s", r.stderr)
	}

	setState(t, root)
	r = run(t, app, "argocd", "generate")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "empty render: desired.yaml lists no generation; set the parameter allow-empty=true") {
		t.Fatalf("empty pool: %+v", r)
	}
	t.Setenv("ARGOCD_APP_PARAMETERS", `[{"name":"pool","string":"agents"},{"name":"allow-empty","string":"true"}]`)
	if r = run(t, app, "argocd", "generate"); r.code != 0 || r.stdout != "" {
		t.Fatalf("empty pool with allow-empty: %+v", r)
	}
	t.Setenv("ARGOCD_APP_PARAMETERS", "")
	t.Setenv("PARAM_POOL", "batch")
	if r = run(t, app, "argocd", "generate"); r.code != 2 || !strings.Contains(r.stderr, "has no pool batch (pools/batch/pool.yaml)") {
		t.Fatalf("unknown pool: %+v", r)
	}
	t.Setenv("PARAM_POOL", "")
	if r = run(t, app, "argocd", "generate"); r.code != 2 || !strings.Contains(r.stderr, "no pool: set the plugin parameter pool") {
		t.Fatalf("no pool: %+v", r)
	}
}

// generator serve refuses to start without its repository, address or
// token, naming what is missing.
func TestArgoCDGeneratorServeUsage(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--token-file", empty}, "--repo and --listen are required"},
		{[]string{"--repo", dir, "--listen", "127.0.0.1:0"}, "--token-file is required"},
		{[]string{"--repo", dir, "--listen", "127.0.0.1:0", "--token-file", empty}, empty + " is empty"},
	} {
		r := run(t, "", append([]string{"argocd", "generator", "serve"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %+v, want %q", tc.args, r, tc.want)
		}
	}
}
