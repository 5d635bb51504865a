package selfrelease

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// checkFiles pulls a pushed release's files artifact back by its version
// tag: it has the release's artifactType, one layer per file of Out titled
// with its name, and every file listed in checksums.txt (itself signed by
// the release key) has the sha256 listed there: what an install from the
// registry checks.
func checkFiles(t *testing.T, r *Result, pub []byte) {
	t.Helper()
	if r.Files == nil || r.Files.Tag == "" {
		t.Fatalf("release files not pushed and tagged: %+v", r.Files)
	}
	tag, err := name.NewTag(r.Files.Tag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != r.Files.Digest || m.ArtifactType != FilesArtifactType {
		t.Fatalf("%s: digest %s (want %s), artifactType %q", tag, d, r.Files.Digest, m.ArtifactType)
	}
	pulled := map[string][]byte{}
	for _, l := range m.Layers {
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		pulled[l.Annotations["org.opencontainers.image.title"]] = b
	}
	sums, sig := pulled[ChecksumsFile], pulled[SignatureFile]
	v, err := sign.LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		_, file, _ := strings.Cut(l, "  ")
		if err := VerifyDownload(v, sums, sig, file, pulled[file]); err != nil {
			t.Errorf("pulled %s: %v", file, err)
		}
		listed++
	}
	local, _ := os.ReadFile(filepath.Join(r.Out, ChecksumsFile))
	if listed < len(r.Binaries)*2+1 || !bytes.Equal(local, sums) || len(pulled) != r.Files.Files {
		t.Errorf("pulled %d files (%d listed); checksums.txt as written: %t", len(pulled), listed, bytes.Equal(local, sums))
	}
	// A file changed after the release is refused against the pulled checksums.
	bin := r.Binaries[0].File
	if err := VerifyDownload(v, sums, sig, bin, append(pulled[bin], 0)); err == nil {
		t.Errorf("a tampered %s verified", bin)
	}
}

// TestRefusedFilesPushLeavesNoTag: a registry (the in-process registry
// behind registrytest's fault proxy) that refuses the files artifact's
// blobs, after the image was pushed and signed, fails the release and
// leaves no version tag on the image or the files.
func TestRefusedFilesPushLeavesNoTag(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	reg := registrytest.NewInProcess(t)
	proxy := registrytest.StartFaultProxy(t, "http://"+reg)
	proxy.Inject(registrytest.Rule{Method: http.MethodPost, PathContains: "/" + FilesRepository + "/blobs/uploads/", Fault: registrytest.Status(http.StatusForbidden)})
	proxy.Inject(registrytest.Rule{Method: http.MethodPut, PathContains: "/" + FilesRepository + "/", Fault: registrytest.Status(http.StatusForbidden)})
	sv, _ := testSigner(t)
	o := Options{Dir: moduleRoot, Out: t.TempDir(), Snapshot: true, Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH},
		Programs: []string{"slipway-runner"}, Signer: sv, Repository: proxy.Addr() + "/slipway-dev", Push: true, RunnerImage: runnerImage}
	_, err := Release(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), FilesRepository) || proxy.Faults() == 0 {
		t.Fatalf("release through a registry refusing its files: %v (%d refused)", err, proxy.Faults())
	}
	for _, repo := range []string{"slipway-runner", FilesRepository} {
		r, _ := name.NewRepository(reg + "/slipway-dev/" + repo)
		tags, _ := remote.List(r)
		for _, tag := range tags {
			if !strings.HasPrefix(tag, "sha256-") {
				t.Errorf("%s has tag %s after a refused push", r, tag)
			}
		}
		if repo == "slipway-runner" && len(tags) == 0 {
			t.Errorf("%s: the image was not pushed and signed before the files were refused", r)
		}
	}
}
