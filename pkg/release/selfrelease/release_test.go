package selfrelease

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// runnerImage is what slipway release gives: the execution plane's runner image.
func runnerImage(ctx context.Context, bin string, epoch time.Time, p v1.Platform, opts ...rootfs.LayerOption) (v1.Image, func() error, error) {
	return sandbox.RunnerImage(ctx, bin, epoch, p, 0, opts...)
}

// moduleRoot is the root of this module: the tree the real releases build.
const moduleRoot = "../../.."

func testSigner(t testing.TB) (signature.SignerVerifier, []byte) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadSigner(priv, []byte("test"))
	if err != nil {
		t.Fatal(err)
	}
	return sv, pub
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestRefusals: a dirty tree is refused naming its files, an untagged commit
// and a version that is not HEAD's tag are refused, and a snapshot is never
// given a release version. Each refuses before anything is built.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q")
	for _, f := range []string{"go.mod", "main.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, dir, "add", ".")
	gitRun(t, dir, "commit", "-qm", "one")
	sv, _ := testSigner(t)
	rel := func(o Options) error {
		o.Dir, o.Out, o.Signer = dir, filepath.Join(t.TempDir(), "out"), sv
		_, err := Release(context.Background(), o)
		if err == nil {
			t.Fatal("released")
		}
		if entries, _ := os.ReadDir(o.Out); len(entries) > 0 {
			t.Errorf("a refused release wrote %d files", len(entries))
		}
		return err
	}
	if err := rel(Options{}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no release tag") {
		t.Errorf("untagged: %v", err)
	}
	gitRun(t, dir, "tag", "v1.2.3")
	if err := rel(Options{Version: "v1.2.4"}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "v1.2.4 is not a tag") {
		t.Errorf("wrong version: %v", err)
	}
	if err := rel(Options{Snapshot: true, Version: "v1.2.3"}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "never a release") {
		t.Errorf("snapshot as a release: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := rel(Options{Version: "v1.2.3"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "main.go") || !strings.Contains(err.Error(), "new.txt") || !strings.Contains(err.Error(), "--snapshot") {
		t.Errorf("dirty tree: %v", err)
	}
	// Unsigned only as a snapshot.
	_, err = Release(context.Background(), Options{Dir: dir, Out: t.TempDir(), Version: "v1.2.3"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("unsigned release: %v", err)
	}
}

// newRegistry is an in-process registry; refuse, when it returns true for a
// request, makes the registry answer 403 to it.
func newRegistry(t *testing.T, refuse func(*http.Request) bool) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse != nil && refuse(r) {
			http.Error(w, `{"errors":[{"code":"DENIED","message":"refused by the test"}]}`, http.StatusForbidden)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func platforms(t *testing.T) []string {
	if testing.Short() {
		return []string{runtime.GOOS + "/" + runtime.GOARCH}
	}
	return Platforms
}

// TestReproducibleAndVerified releases the same commit twice, the second time
// pushed, signed and attested to a registry: the binaries are byte-identical
// and the image digests equal (-short: the host's platform only; else both);
// the pushed release passes its own policy with slipway verify's code, and
// an image built elsewhere (same binary, same key, another builder) does not.
func TestReproducibleAndVerified(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	sv, pub := testSigner(t)
	ctx := context.Background()
	host := newRegistry(t, nil)
	var res [2]*Result
	for i := range res {
		o := Options{Dir: moduleRoot, Out: filepath.Join(t.TempDir(), "dist"), Snapshot: true, Platforms: platforms(t), Signer: sv,
			Repository: host + "/slipway-dev", Push: i == 1, RunnerImage: runnerImage}
		r, err := Release(ctx, o)
		if err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		res[i] = r
		t.Logf("release %d: %+v", i, r.Seconds)
	}
	a, b := res[0], res[1]
	if len(a.Binaries) != len(Programs)*len(platforms(t)) || len(a.Images) != len(Programs) {
		t.Fatalf("built %d binaries, %d images", len(a.Binaries), len(a.Images))
	}
	for i, ba := range a.Binaries {
		x, _ := os.ReadFile(filepath.Join(a.Out, ba.File))
		y, _ := os.ReadFile(filepath.Join(b.Out, b.Binaries[i].File))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two releases of one commit", ba.File)
		}
		if ba.Platform == runtime.GOOS+"/"+runtime.GOARCH && !strings.Contains(ba.Reports, a.Version) {
			t.Errorf("%s reports %q", ba.File, ba.Reports)
		}
	}
	for _, f := range []string{ChecksumsFile, ProvenanceFile, Programs[0] + "-" + runtime.GOOS + "-" + runtime.GOARCH + ".spdx.json"} {
		x, _ := os.ReadFile(filepath.Join(a.Out, f))
		y, _ := os.ReadFile(filepath.Join(b.Out, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two releases of one commit", f)
		}
	}
	for i, im := range a.Images {
		if im.Digest != b.Images[i].Digest || len(im.Platforms) != len(platforms(t)) {
			t.Errorf("image %s: %s then %s", im.Program, im.Digest, b.Images[i].Digest)
		}
		t.Logf("image %s %s %v", im.Program, im.Digest, im.Platforms)
	}
	// The OCI layouts are byte for byte the same: the platform images'
	// blobs are written as each is made, in whatever order, and index.json
	// names the indexes in program order.
	la, lb := layoutFiles(t, a), layoutFiles(t, b)
	if len(la) == 0 || len(la) != len(lb) {
		t.Errorf("layouts hold %d and %d files", len(la), len(lb))
	}
	for f, sum := range la {
		if lb[f] != sum {
			t.Errorf("%s/%s differs between two releases of one commit", LayoutDir, f)
		}
	}
	checkLayout(t, a)
	checkVerify(t, ctx, b, sv)
	checkFiles(t, b, pub)
	checkPublish(t, ctx, a, sv, pub)
}

// layoutFiles are the files of r's OCI layout, by path under it, with their
// sha256; each blob must hash to its name.
func layoutFiles(t *testing.T, r *Result) map[string]string {
	t.Helper()
	root := filepath.Join(r.Out, r.Layout)
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if files[rel], _, err = fileSHA256(p); err != nil {
			return err
		}
		// A blob is what its name says (layer files are linked in).
		if dir, hex := filepath.Split(rel); dir == filepath.Join("blobs", "sha256")+string(filepath.Separator) && files[rel] != hex {
			t.Errorf("%s/%s holds sha256:%s", LayoutDir, rel, files[rel])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkLayout reads the OCI layout back: it holds each index reported.
func checkLayout(t *testing.T, r *Result) {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(r.Out, r.Layout))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, im := range r.Images {
		if i >= len(m.Manifests) || m.Manifests[i].Digest.String() != im.Digest {
			t.Errorf("layout does not hold %s %s", im.Program, im.Digest)
			continue
		}
		child, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := child.ImageIndex(m.Manifests[i].Digest); err != nil {
			t.Errorf("layout: %s: %v", im.Digest, err)
		}
	}
}

// TestRefusedPushLeavesNoTag: a registry that refuses the blobs of the
// second program, after the first was pushed and signed, leaves the release
// failed and no version tag in any repository.
func TestRefusedPushLeavesNoTag(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	var refused atomic.Int32
	host := newRegistry(t, func(r *http.Request) bool {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/slipway-runner/blobs/uploads/") {
			refused.Add(1)
			return true
		}
		return false
	})
	sv, _ := testSigner(t)
	o := Options{Dir: moduleRoot, Out: t.TempDir(), Snapshot: true, Platforms: []string{runtime.GOOS + "/" + runtime.GOARCH},
		Programs: []string{"slipway-cmp", "slipway-runner"}, Signer: sv, Repository: host + "/slipway-dev", Push: true, RunnerImage: runnerImage}
	_, err := Release(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "refused by the test") || refused.Load() == 0 {
		t.Fatalf("release through a refusing registry: %v (%d refused)", err, refused.Load())
	}
	// slipway-cmp went in whole, signed, but is not tagged; slipway-runner
	// has nothing.
	repo, _ := name.NewRepository(host + "/slipway-dev/slipway-cmp")
	tags, err := remote.List(repo)
	if err != nil {
		t.Fatal(err)
	}
	signed := false
	for _, tag := range tags {
		signed = signed || strings.HasSuffix(tag, ".sig")
		if !strings.HasPrefix(tag, "sha256-") {
			t.Errorf("%s has tag %s after a refused push", repo, tag)
		}
	}
	if !signed {
		t.Errorf("%s: tags %v: the first program was not pushed and signed before the refusal", repo, tags)
	}
	repo, _ = name.NewRepository(host + "/slipway-dev/slipway-runner")
	if tags, err := remote.List(repo); err == nil && len(tags) > 0 {
		t.Errorf("%s has tags %v after its push was refused", repo, tags)
	}
}
