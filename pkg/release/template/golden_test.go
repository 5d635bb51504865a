package template

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/slipway-dev/slipway/pkg/rootfs"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.digest")

// TestGoldenDigest: a template built from committed bytes only gives the
// committed digest, under GOMAXPROCS=1 and GOMAXPROCS=2.
func TestGoldenDigest(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run("GOMAXPROCS="+string(rune('0'+procs)), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			base, tmpl := goldenBuild(t)
			checkGolden(t, "testdata/golden/base.digest", base)
			checkGolden(t, "testdata/golden/template.digest", tmpl)
		})
	}
}

func goldenBuild(t *testing.T) (baseDigest, templateID string) {
	t.Helper()
	// The base: committed files, with modes set here so a checkout's umask cannot matter.
	dir := t.TempDir()
	must(t, os.CopyFS(dir, os.DirFS("testdata/golden/base")))
	must(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}))
	img, done, err := ImageFromDir(context.Background(), dir, time.Unix(1700000000, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin"}, rootfs.WithOwner(0, 0))
	must(t, err)
	defer done()
	lay := t.TempDir()
	must(t, WriteLayout(lay, img, "golden/base"))
	d, err := img.Digest()
	must(t, err)
	baseDigest = d.String()
	t.Logf("golden base digest %s", baseDigest)

	// The spec names the base by its committed digest; the build reads it from the layout.
	spec := t.TempDir()
	must(t, os.CopyFS(spec, os.DirFS("testdata/golden/template")))
	tp, err := Load(filepath.Join(spec, "template.yaml"))
	must(t, err)
	res, err := Build(context.Background(), tp, WithSource(Layout{Path: lay}))
	must(t, err)
	defer res.Close()
	return baseDigest, res.TemplateID
}

func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	if *updateGolden {
		must(t, os.WriteFile(file, []byte(got+"\n"), 0o644))
		return
	}
	want, err := os.ReadFile(file)
	must(t, err)
	if strings.TrimSpace(string(want)) != got {
		t.Fatalf("%s: got %s, committed %s (go test -run Golden -update to accept a deliberate change)", file, got, strings.TrimSpace(string(want)))
	}
}
