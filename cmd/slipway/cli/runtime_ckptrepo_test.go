package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runtime serve --checkpoint-repository needs --checkpoint-key: the key
// signs what is pushed (a usage error, exit 2, before anything is served).
func TestRuntimeServeCheckpointRepositoryNeedsKey(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("t0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "runtime", "serve", "--repo", filepath.Join(dir, "none.git"), "--state", filepath.Join(dir, "state"),
		"--listen", "127.0.0.1:0", "--token-file", tok, "--insecure-skip-verify", "--checkpoint-repository", "registry.example/checkpoints")
	if r.code != 2 || !strings.Contains(r.stderr, "--checkpoint-repository needs --checkpoint-key") {
		t.Errorf("exit %d, stderr %q, want 2 and the missing key named", r.code, r.stderr)
	}
}
