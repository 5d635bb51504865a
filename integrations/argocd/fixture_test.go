package argocd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/testharness/registrytest"
)

const password = "argocd-test"

// world is a registry with images signed by the key ci (which the config
// repository's policy trusts) or by rogue (which it does not), and
// generations of pool agents made from them by slipway generation create:
// the fixture of cmd/slipway/cli's TestArgoCDGenerate, made with the
// slipway binary the plugin runs.
type world struct {
	host, keys string
	env        []string
	gens       map[string]*gen // by label
}

// gen is one generation document and what it pins.
type gen struct {
	id       string
	sequence int
	file     string // its YAML
	tmpl     string // its workspace template's digest reference
	pool     string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{host: registrytest.NewInProcess(t), keys: t.TempDir(), env: []string{"COSIGN_PASSWORD=" + password}, gens: map[string]*gen{}}
	for _, k := range []string{"ci", "rogue"} {
		must(t, "", w.env, "keys", "generate", "--output-key-prefix", filepath.Join(w.keys, k))
	}
	return w
}

// image pushes a random image to repo:tag, signed by key ("" for none),
// and returns its digest reference.
func (w *world) image(t testing.TB, repoTag, key string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := registrytest.Push(t, w.host+"/"+repoTag, img).String()
	if key != "" {
		must(t, "", w.env, "sign", d, "--key", filepath.Join(w.keys, key+".key"), "--offline-no-tlog")
	}
	return d
}

// generation makes the next generation of pool agents (from prev, "" for
// the first) pinning cp, runner and tmpl, remembered under label.
func (w *world) generation(t testing.TB, label, prev, cp, runner, tmpl string) *gen {
	t.Helper()
	return w.generationIn(t, "agents", label, prev, cp, runner, tmpl)
}

// generationIn is generation for another pool; checkout writes only pool
// agents' generations.
func (w *world) generationIn(t testing.TB, pool, label, prev, cp, runner, tmpl string) *gen {
	t.Helper()
	out := filepath.Join(w.keys, label+".yaml")
	args := []string{"generation", "create", "--pool", pool, "--insecure-skip-verify", "--out-file", out,
		"--pin", "controlPlane=" + cp, "--pin", "runner=" + runner, "--pin", "workspaceTemplate=" + tmpl,
		"--control-plane-protocol", "1", "--runner-protocol", "1"}
	if prev != "" {
		args = append(args, "--from", w.gens[prev].file)
	}
	must(t, "", w.env, args...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ID       string `json:"id"`
		Sequence int    `json:"sequence"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.ID == "" {
		t.Fatalf("generation %s: %v\n%s", label, err, b)
	}
	g := &gen{id: doc.ID, sequence: doc.Sequence, file: out, tmpl: tmpl, pool: pool}
	w.gens[label] = g
	return g
}

// checkout writes the config repository as Argo CD checks it out: pool
// agents with every generation made so far, desired.yaml listing gens
// (the first active, the rest warming), the verification policy trusting
// ci, and extra files. It returns the root.
func (w *world) checkout(t testing.TB, root string, gens []*gen, extra map[string]string) string {
	t.Helper()
	for p, body := range w.files(t, gens, extra) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// files is what checkout writes, by path.
func (w *world) files(t testing.TB, gens []*gen, extra map[string]string) map[string]string {
	t.Helper()
	pub, err := os.ReadFile(filepath.Join(w.keys, "ci.pub"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"pools/agents/pool.yaml": poolYAML,
		"policies/verification.yaml": `apiVersion: slipway.dev/v1alpha1
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
		"policies/keys/ci.pub":      string(pub),
		"pools/agents/desired.yaml": stateYAML(gens),
	}
	for _, g := range w.gens {
		if g.pool != "agents" {
			continue
		}
		b, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatal(err)
		}
		files["pools/agents/generations/"+g.id+".yaml"] = string(b)
	}
	for p, body := range extra {
		files[p] = body
	}
	return files
}

// poolYAML is pool.Marshal(pool.Default("agents")).
const poolYAML = `apiVersion: slipway.dev/v1alpha1
kind: Pool
metadata:
  name: agents
spec:
  requiredKinds: [controlPlane, runner, workspaceTemplate]
  warmSize: 2
  refillPerSecond: 2
  readyTimeout: 30s
  phaseDeadlines: {compatibility: 1m0s, drain: 30m0s, prove: 5m0s, remove: 5m0s, retain: 1m0s, route: 1m0s, warm: 5m0s}
  drainDeadline: 30m0s
  onDrainDeadline: wait
  rollbackWindow: 24h0m0s
  restoreWindow: 168h0m0s
  network: {mode: deny}
  proofs: [allocate, identity, network, template-tests, workspace-writable, cleanup]
`

// stateYAML is pool agents' desired.yaml: gens[0] active, the rest warming.
func stateYAML(gens []*gen) string {
	states := make([]string, len(gens))
	for i := range gens {
		states[i] = map[bool]string{true: "active", false: "warming"}[i == 0]
	}
	return statesYAML(gens, states)
}

// statesYAML is pool agents' desired.yaml with gens[i] in states[i].
func statesYAML(gens []*gen, states []string) string {
	var sb strings.Builder
	sb.WriteString("apiVersion: slipway.dev/v1alpha1\nkind: PoolState\npool: agents\n")
	if len(gens) == 0 {
		sb.WriteString("generations: []\n")
		return sb.String()
	}
	sb.WriteString("generations:\n")
	for i, g := range gens {
		fmt.Fprintf(&sb, "- id: %s\n  sequence: %d\n  state: %s\n  warmSize: 2\n  since: 2026-11-01T00:00:00Z\n", g.id, g.sequence, states[i])
	}
	fmt.Fprintf(&sb, "target: %s\n", gens[len(gens)-1].id)
	return sb.String()
}
