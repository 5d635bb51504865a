package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runtime serve's backend flags: kubernetes needs a kubeconfig, a
// kubeconfig is for kubernetes only, an unknown backend is named, and a
// kubeconfig that does not load is named (all usage errors, exit 2,
// before anything is served).
func TestRuntimeServeBackendFlags(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("t0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	base := []string{"runtime", "serve", "--config-repo", filepath.Join(dir, "none.git"), "--state", filepath.Join(dir, "state"),
		"--listen", "127.0.0.1:0", "--token-file", tok, "--insecure-skip-verify"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "kubernetes"}, "--backend kubernetes needs --kubeconfig"},
		{[]string{"--kubeconfig", "k"}, "--kubeconfig and --namespace are for --backend kubernetes"},
		{[]string{"--backend", "nomad"}, `backend "nomad": want local or kubernetes`},
		{[]string{"--backend", "kubernetes", "--kubeconfig", filepath.Join(dir, "missing")}, filepath.Join(dir, "missing")},
	} {
		r := run(t, "", append(base, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
