package template

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// env is a real registry (go-containerregistry's, in process) holding a
// busybox base image made from the host's busybox-static.
type env struct {
	host       string
	baseRef    string // host/base@sha256:…
	baseDigest string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		bb = "/bin/busybox"
	}
	if out, err := exec.Command("ldd", bb).CombinedOutput(); err == nil || !strings.Contains(string(out), "not a dynamic") {
		t.Fatalf("need a static busybox (apt-get install busybox-static): ldd %s says %s", bb, out)
	}
	host := registrytest.NewInProcess(t)

	dir := filepath.Join(t.TempDir(), "base")
	for _, d := range []string{"bin", "etc", "root", "tmp", "workspace", "home/user", "proc", "dev", "var/tmp"} {
		must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o777|os.ModeSticky))
	must(t, os.Chmod(filepath.Join(dir, "var/tmp"), 0o777|os.ModeSticky))
	b, err := os.ReadFile(bb)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "bin/busybox"), b, 0o755))
	for _, a := range []string{"sh", "echo", "test", "cat", "ls", "grep", "touch", "rm", "mkdir", "chown", "printf", "id", "timeout", "sleep", "chmod", "true", "false"} {
		must(t, os.Symlink("busybox", filepath.Join(dir, "bin", a)))
	}
	must(t, os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "etc/machine-id"), nil, 0o444))
	must(t, os.Chown(filepath.Join(dir, "workspace"), 1000, 1000))
	must(t, os.Chown(filepath.Join(dir, "home/user"), 1000, 1000))

	img, done, err := ImageFromDir(context.Background(), dir, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin"})
	must(t, err)
	defer done()
	r, err := Push(context.Background(), img, host+"/base")
	must(t, err)
	return &env{host: host, baseRef: r, baseDigest: strings.TrimPrefix(r, host+"/base@")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeSpec writes a template folder with spec text (BASE replaced) and files.
func (e *env) writeSpec(t *testing.T, spec string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(body), 0o755))
	}
	file := filepath.Join(dir, "template.yaml")
	must(t, os.WriteFile(file, []byte(strings.ReplaceAll(spec, "BASE", e.baseRef)), 0o644))
	return file
}

func (e *env) build(t *testing.T, file string, opts ...Option) (*Result, error) {
	t.Helper()
	tp, err := Load(file)
	if err != nil {
		return nil, err
	}
	res, err := Build(context.Background(), tp, opts...)
	if res != nil {
		t.Cleanup(func() { res.Close() })
	}
	return res, err
}

// tagBase tags the base image as host/base:latest too.
func tagBase(e *env) error {
	d, err := name.NewDigest(e.baseRef)
	if err != nil {
		return err
	}
	desc, err := remote.Get(d)
	if err != nil {
		return err
	}
	return remote.Tag(d.Context().Tag("latest"), desc)
}
