package pipelines

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestSetupInstallRelease runs the setup action's installer against a real
// snapshot release of slipway (host platform, signed with a test key) served
// over 127.0.0.1 HTTP: with release-url and the key it verifies
// checksums.txt.sig, takes slipway-linux-<arch>'s sha256 from checksums.txt
// and installs the binary, which reports the release's version; with
// release-url and sha256 alone likewise. A tampered binary, a tampered
// checksums.txt, another key, a sha256 that is not the listed one, and no
// trust anchor at all are each refused, and nothing is installed.
func TestSetupInstallRelease(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("releases are built for linux/amd64 and linux/arm64")
	}
	for _, tool := range []string{"go", "curl", "openssl", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	root := t.TempDir()
	good := filepath.Join(root, "good")
	res, pub := snapshotRelease(t, good)
	_, otherPub, err := sign.GenerateKeys([]byte("other"))
	if err != nil {
		t.Fatal(err)
	}
	file := "slipway-linux-" + runtime.GOARCH
	bin, err := os.ReadFile(filepath.Join(good, file))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	listed := hex.EncodeToString(sum[:])
	checksums, _ := os.ReadFile(filepath.Join(good, "checksums.txt"))
	if !bytes.Contains(checksums, []byte(listed+"  "+file+"\n")) {
		t.Fatalf("checksums.txt does not list %s as %s:\n%s", file, listed, checksums)
	}
	// Variants of the release: one byte of the binary changed; checksums.txt
	// rewritten to list the changed binary (its signature left as it was).
	variant := func(name string, edit map[string][]byte) {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{file, "checksums.txt", "checksums.txt.sig"} {
			if b, ok := edit[f]; ok {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(filepath.Join(good, f), filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tampered := append([]byte(nil), bin...)
	tampered[len(tampered)/2] ^= 1
	tsum := sha256.Sum256(tampered)
	variant("badbin", map[string][]byte{file: tampered})
	variant("badsums", map[string][]byte{file: tampered,
		"checksums.txt": bytes.ReplaceAll(checksums, []byte(listed), []byte(hex.EncodeToString(tsum[:])))})
	srv := httptest.NewServer(http.FileServer(http.Dir(root)))
	t.Cleanup(srv.Close)

	install := func(releaseURL, key, sha string) (string, string, string, error) {
		t.Helper()
		run := t.TempDir()
		cmd := exec.Command("bash", "github/setup/install.sh")
		cmd.Env = append(os.Environ(),
			"SLIPWAY_VERSION="+res.Version, "SLIPWAY_URL=", "SLIPWAY_RELEASE_URL="+releaseURL, "SLIPWAY_KEY="+key, "SLIPWAY_SHA256="+sha,
			"SLIPWAY_INSTALL_DIR="+filepath.Join(run, "bin"),
			"GITHUB_OUTPUT="+filepath.Join(run, "output"), "GITHUB_PATH="+filepath.Join(run, "path"))
		out, err := cmd.CombinedOutput()
		return run, string(out), readOr(filepath.Join(run, "output")), err
	}
	for _, c := range []struct{ name, key, sha string }{{"key", string(pub), ""}, {"sha256", "", listed}, {"both", string(pub), listed}} {
		run, out, outputs, err := install(srv.URL+"/good/", c.key, c.sha)
		if err != nil {
			t.Fatalf("install with %s: %v\n%s", c.name, err, out)
		}
		installed := filepath.Join(run, "bin", "slipway")
		if outputs != "path="+installed+"\nsha256="+listed+"\n" {
			t.Errorf("install with %s: outputs %q", c.name, outputs)
		}
		if v, err := exec.Command(installed, "version").Output(); err != nil || !strings.HasPrefix(string(v), "slipway "+res.Version+" ") {
			t.Errorf("install with %s: installed binary says %q %v", c.name, v, err)
		}
	}
	for _, c := range []struct{ name, dir, key, sha, want string }{
		{"tampered binary", "badbin", string(pub), "", "checksum mismatch for slipway " + res.Version + ": got sha256 " + hex.EncodeToString(tsum[:])},
		{"tampered checksums", "badsums", string(pub), "", "signature mismatch: " + srv.URL + "/badsums/checksums.txt.sig is not the key's signature"},
		{"other key", "good", string(otherPub), "", "signature mismatch"},
		{"other sha256", "good", "", strings.Repeat("0", 64), "checksums.txt lists sha256 " + listed + " for " + file + ", want " + strings.Repeat("0", 64)},
		{"no anchor", "good", "", "", "release-url needs key or sha256"},
		{"not a key", "good", "not a key", "", "key is not a PEM public key"},
		{"absent release", "absent", string(pub), "", "download of " + srv.URL + "/absent/checksums.txt failed"},
	} {
		run, out, outputs, err := install(srv.URL+"/"+c.dir, c.key, c.sha)
		if err == nil || !strings.Contains(out, "::error title=slipway setup::") || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
		if outputs != "" || readOr(filepath.Join(run, "path")) != "" {
			t.Errorf("%s: outputs written: %q", c.name, outputs)
		}
		if _, err := os.Stat(filepath.Join(run, "bin", "slipway")); err == nil {
			t.Errorf("%s: a binary was installed", c.name)
		}
	}
}

// snapshotRelease makes a snapshot release of slipway for the host's
// platform into out, signed with a new key, whose public key it returns.
func snapshotRelease(t *testing.T, out string) (*selfrelease.Result, []byte) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := selfrelease.Release(context.Background(), selfrelease.Options{Dir: "..", Out: out, Snapshot: true,
		Platforms: []string{"linux/" + runtime.GOARCH}, Programs: []string{"slipway"}, Signer: sv})
	if err != nil {
		t.Fatal(err)
	}
	return res, pub
}
