package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestVerifyBlob: verify-blob accepts the release key's signature over
// checksums.txt and a download it lists, and refuses (exit 1) a tampered
// download or a signature by another key.
func TestVerifyBlob(t *testing.T) {
	dir := t.TempDir()
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	sv, _ := sign.LoadSigner(priv, []byte("pw"))
	bin := []byte("a binary")
	sum := sha256.Sum256(bin)
	sums := []byte(hex.EncodeToString(sum[:]) + "  slipway-linux-amd64\n")
	sig, _ := sign.SignBlob(sv, sums)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pubFile, sumsFile, sigFile := write("release.pub", pub), write("checksums.txt", sums), write("checksums.txt.sig", sig)
	binFile := write("slipway-linux-amd64", bin)
	if r := run(t, "", "verify-blob", sumsFile, "--key", pubFile, "--signature", sigFile, "--file", binFile); r.code != 0 || r.stdout != "Verified OK\n" {
		t.Fatalf("good download: %+v", r)
	}
	if r := run(t, "", "verify-blob", sumsFile, "--key", pubFile, "--signature", sigFile); r.code != 0 {
		t.Fatalf("signature alone: %+v", r)
	}
	write("slipway-linux-amd64", []byte("a binary, changed"))
	if r := run(t, "", "verify-blob", sumsFile, "--key", pubFile, "--signature", sigFile, "--file", binFile); r.code != 1 || !strings.Contains(r.stderr, "the signed checksums.txt says") {
		t.Fatalf("tampered download: %+v", r)
	}
	other, _ := sign.LoadSigner(mustKey(t), []byte("pw"))
	otherSig, _ := sign.SignBlob(other, sums)
	write("checksums.txt.sig", otherSig)
	if r := run(t, "", "verify-blob", sumsFile, "--key", pubFile, "--signature", sigFile); r.code != 1 || !strings.Contains(r.stderr, "signature does not match") {
		t.Fatalf("another key's signature: %+v", r)
	}
	if r := run(t, "", "verify-blob", sumsFile, "--key", pubFile); r.code != 2 {
		t.Fatalf("no --signature: %+v", r)
	}
}

func mustKey(t *testing.T) []byte {
	t.Helper()
	priv, _, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// TestReleaseRefusesDirtyTree: slipway release in a tree with uncommitted
// changes exits 1 naming them, and builds nothing.
func TestReleaseRefusesDirtyTree(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-qm", "x")
	git("tag", "v1.0.0")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "release.key")
	if err := os.WriteFile(key, mustKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "pw")
	out := filepath.Join(t.TempDir(), "dist")
	r := run(t, dir, "release", "--out", out, "--sign-key", key, "--offline-no-tlog")
	if r.code != 1 || !strings.Contains(r.stderr, "uncommitted changes") || !strings.Contains(r.stderr, "go.mod") {
		t.Fatalf("dirty tree: %+v", r)
	}
	if _, err := os.Stat(out); err == nil {
		if entries, _ := os.ReadDir(out); len(entries) > 0 {
			t.Fatalf("a refused release wrote %d files", len(entries))
		}
	}
}

// release --from publishes a built release: without --push it is a usage
// error, and a folder that is not a release is refused, naming it.
func TestReleaseFromRefuses(t *testing.T) {
	key := filepath.Join(t.TempDir(), "release.key")
	if err := os.WriteFile(key, mustKey(t), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "pw")
	empty := t.TempDir()
	if r := run(t, "", "release", "--from", empty, "--sign-key", key, "--offline-no-tlog"); r.code != 2 || !strings.Contains(r.stderr, "--push") {
		t.Errorf("--from without --push: %+v", r)
	}
	if r := run(t, "", "release", "--from", empty, "--push", "127.0.0.1:1/x", "--sign-key", key, "--offline-no-tlog"); r.code != 1 || !strings.Contains(r.stderr, "not a release") || !strings.Contains(r.stderr, empty) {
		t.Errorf("--from an empty folder: %+v", r)
	}
}
