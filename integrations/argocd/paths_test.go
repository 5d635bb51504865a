package argocd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/status"
)

// policyTrusting is a VerificationPolicy trusting key (its public key
// beside it as keys/<key>.pub, relative to the policy).
func policyTrusting(key string) string {
	return `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: trust-` + key + `}
spec:
  transparencyLog: none
  keys: [{name: ` + key + `, publicKeyFile: keys/` + key + `.pub}]
  rules:
    - name: platform
      match: {kinds: [control-plane, runner, workspace-template]}
      signatures: {keys: [` + key + `]}
`
}

// operatorPolicy writes the sidecar's operator policy (the ConfigMap
// slipway-policy mounted outside any checkout) trusting key, and returns
// its file.
func (w *world) operatorPolicy(t testing.TB, key string) string {
	t.Helper()
	dir := t.TempDir()
	pub, err := os.ReadFile(filepath.Join(w.keys, key+".pub"))
	if err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{"verification.yaml": policyTrusting(key), "keys/" + key + ".pub": string(pub)} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "verification.yaml")
}

// TestCMPServerPoolFolder drives Argo CD's CMP server as a repo-server
// with reposerver.plugin.use.manifest.generate.paths: "true" does for an
// Application annotated argocd.argoproj.io/manifest-generate-paths: ".":
// only the pool's folder is streamed (SendRepoStream's rootPath is
// pools/agents, as runConfigManagementPluginSidecars computes it with
// getApplicationRootPath) and the plugin runs at the top of it. With the
// operator's policy ($SLIPWAY_ARGOCD_POLICY_FILE in the sidecar), a
// verified pool renders the same bytes as the whole checkout does; an
// unsigned generation is refused; a policy planted in the pool's folder
// (or the repository's own, in the whole-checkout layout) is ignored in
// favour of the operator's; with no operator policy the pool's folder
// alone is a clear error, never an unverified render.
func TestCMPServerPoolFolder(t *testing.T) {
	w := newWorld(t)
	cp := w.image(t, "platform/cp:v1", "ci")
	runner := w.image(t, "platform/runner:v1", "ci")
	signed := w.generation(t, "signed", "", cp, runner, w.image(t, "templates/tools:v1", "ci"))
	unsigned := w.generation(t, "unsigned", "signed", cp, runner, w.image(t, "templates/tools:v2", ""))
	rogue := w.generation(t, "rogue", "unsigned", cp, runner, w.image(t, "templates/tools:v3", "rogue"))
	operator := w.operatorPolicy(t, "ci")
	s := startCMP(t, "SLIPWAY_VERIFY_CACHE_DIR="+filepath.Join(t.TempDir(), "verify"))

	root := w.checkout(t, t.TempDir(), []*gen{signed}, map[string]string{"clusters/prod/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
	rev := strings.Repeat("7a", 20)
	whole := app{name: "pool-agents", path: "pools/agents", revision: rev, params: map[string]string{"pool": "agents"}}
	alone := whole
	alone.alone = true

	// The whole checkout, verified against the repository's policy.
	want, err := s.generate(t, root, whole)
	if err != nil {
		t.Fatalf("whole checkout: %v", err)
	}

	// The pool's folder alone with no operator policy: refused, saying why.
	_, err = s.generate(t, root, alone)
	if st, _ := status.FromError(err); err == nil || !strings.Contains(st.Message(), "pool agents's folder alone") || !strings.Contains(st.Message(), "SLIPWAY_ARGOCD_POLICY_FILE") {
		t.Fatalf("pool folder without an operator policy: %v", err)
	}

	setenv(t, "SLIPWAY_ARGOCD_POLICY_FILE", operator)
	got, err := s.generate(t, root, alone)
	if err != nil {
		t.Fatalf("pool folder: %v", err)
	}
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Fatalf("the pool's folder alone renders differently from the whole checkout:\n%s\nwant\n%s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
	}
	// The plugin says on stderr which policy it used (Argo CD logs it).
	r := slipway(t, filepath.Join(root, "pools", "agents"), append(alone.environ(t), "SLIPWAY_ARGOCD_POLICY_FILE="+operator), "argocd", "generate")
	if r.code != 0 || !strings.Contains(r.stderr, "operator "+operator+" (sha256:") {
		t.Fatalf("stderr does not name the operator's policy: %+v", r)
	}

	// An unsigned generation is refused in the pool's folder too.
	w.checkout(t, root, []*gen{signed, unsigned}, nil)
	_, err = s.generate(t, root, alone)
	if st, _ := status.FromError(err); err == nil || !strings.Contains(st.Message(), unsigned.id) || !strings.Contains(st.Message(), "no signature") {
		t.Fatalf("unsigned generation in the pool's folder: %v", err)
	}

	// The pool's writer plants a policy trusting rogue, in the pool's
	// folder and as the repository's: the operator's (ci) still decides.
	rogueKey, err := os.ReadFile(filepath.Join(w.keys, "rogue.pub"))
	if err != nil {
		t.Fatal(err)
	}
	w.checkout(t, root, []*gen{signed, rogue}, map[string]string{
		"pools/agents/verification.yaml":          policyTrusting("rogue"),
		"pools/agents/keys/rogue.pub":             string(rogueKey),
		"pools/agents/policies/verification.yaml": policyTrusting("rogue"),
		"pools/agents/policies/keys/rogue.pub":    string(rogueKey),
		"policies/verification.yaml":              policyTrusting("rogue"),
		"policies/keys/rogue.pub":                 string(rogueKey),
	})
	for _, a := range []app{alone, whole} {
		_, err = s.generate(t, root, a)
		if st, _ := status.FromError(err); err == nil || !strings.Contains(st.Message(), rogue.id) || !strings.Contains(st.Message(), "(policy trust-ci)") || strings.Contains(st.Message(), signed.id) {
			t.Fatalf("a generation signed by rogue under a planted policy (pool folder alone %v): %v", a.alone, err)
		}
	}
	// Without the operator's policy, the repository's own decides the
	// whole checkout (the existing layout is unchanged): the repository's
	// policy (trust-rogue) is the one that refuses ci's images.
	os.Unsetenv("SLIPWAY_ARGOCD_POLICY_FILE")
	_, err = s.generate(t, root, whole)
	if st, _ := status.FromError(err); err == nil || !strings.Contains(st.Message(), "(policy trust-rogue)") || !strings.Contains(st.Message(), signed.id) {
		t.Fatalf("whole checkout under the repository's policy trusting rogue: %v", err)
	}
}
