package local_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate"
	"github.com/slipway-dev/slipway/pkg/release/template"

	"github.com/slipway-dev/slipway/testharness/need"
)

// fixtures are built once per test binary run.
var fixtures struct {
	once   sync.Once
	err    error
	dir    string
	runner sandbox.RunnerBinary
	base   string // a busybox rootfs (fixtures/base/busybox-rootfs.sh) with ssh-keygen and /etc/ssh added
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runtimeHelper()
	}
	// Layer files of the images the tests make (and the runtime helper's,
	// which is killed) go to a directory removed at the end.
	tmp, err := os.MkdirTemp("", "slipway-local-test-tmp-")
	if err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	if fixtures.dir != "" {
		_ = os.RemoveAll(fixtures.dir)
	}
	_ = os.RemoveAll(tmp)
	os.Exit(code)
}

// setup builds the runner (static, as the Makefile does) and the base
// rootfs once, and fails the test when bwrap cannot run here.
func setup(t *testing.T) {
	t.Helper()
	fixtures.once.Do(func() { fixtures.err = buildFixtures() })
	if fixtures.err != nil {
		t.Fatal(fixtures.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := isolate.Available(ctx); err != nil {
		t.Fatalf("bwrap is needed (make deps): %v", err)
	}
}

func buildFixtures() error {
	dir, err := os.MkdirTemp("", "slipway-local-test-")
	if err != nil {
		return err
	}
	fixtures.dir = dir
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go tool is needed to build the runner: %w", err)
	}
	bin := filepath.Join(dir, "slipway-runner")
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../../../cmd/slipway-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build cmd/slipway-runner: %v\n%s", err, out)
	}
	if fixtures.runner, err = sandbox.RunnerFromFile(bin, runner.ProtocolVersion); err != nil {
		return err
	}
	base := filepath.Join(dir, "base")
	if out, err := exec.Command("bash", "../../../../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
		return fmt.Errorf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	if err := addSSHKeygen(base); err != nil {
		return err
	}
	// The escape suite's probe (testdata/escapeprobe): the system calls
	// the templates have no tool for.
	cmd = exec.Command(goTool, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(base, escapeProbe), "./testdata/escapeprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build testdata/escapeprobe: %v\n%s", err, out)
	}
	fixtures.base = base
	return nil
}

// addSSHKeygen copies the host's ssh-keygen and the libraries ldd names
// into the rootfs, with an /etc/ssh, so that the refresh phase runs a real
// ssh-keygen -A inside the template.
func addSSHKeygen(root string) error {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		return nil // the ssh test says it is skipped
	}
	out, err := exec.Command("ldd", keygen).Output()
	if err != nil {
		return fmt.Errorf("ldd %s: %v", keygen, err)
	}
	files := []string{keygen}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f) // follows the host's symlinks: a plain file in the rootfs
		if err != nil {
			return err
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/ssh"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc/ssh/sshd_config"), []byte("# test\n"), 0o644)
}

func haveSSHKeygen() bool {
	_, err := os.Stat(filepath.Join(fixtures.base, "usr/bin/ssh-keygen"))
	return err == nil
}

// templateImage turns the base rootfs into an image the way a template
// build leaves it: a working directory, a refresh label, and user when set.
// Tests that do not look at ssh host keys leave them out of refresh: making
// an RSA key takes seconds.
func templateImage(t *testing.T, user, refresh string) v1.Image {
	t.Helper()
	setup(t)
	img, err := baseImage(user, refresh)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// baseImage is the image of the base rootfs (its layer file is left in
// the temporary directory until the test binary exits).
func baseImage(user, refresh string) (v1.Image, error) {
	img, _, err := template.ImageFromDir(context.Background(), fixtures.base, time.Unix(0, 0),
		v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin:/usr/bin", "GREETING=hello"})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	c := cfg.Config
	c.WorkingDir = "/workspace"
	c.User = user
	c.Labels = map[string]string{templatemeta.LabelRefresh: refresh}
	return mutate.Config(img, c)
}

func newBackend(t *testing.T, dir string, opts ...local.Option) *local.Backend {
	t.Helper()
	b, err := local.New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Delete what a failed test left running, then give up the directory.
		if all, err := b.List(context.Background(), sandbox.Filter{}); err == nil {
			for _, s := range all {
				_ = b.Delete(context.Background(), s.ID)
			}
		}
		_ = b.Close()
	})
	return b
}

func specFor(t *testing.T, img v1.Image) sandbox.Spec {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		Pool:       "default",
		Generation: "g-0123abcd",
		Template:   img,
		TemplateID: d.String(),
		Runner:     fixtures.runner,
	}
}

// templateUserBackend is a Backend (and its state directory) for templates
// with a user (uid 1000): run as root, the backend starts bwrap as that
// uid, which must reach the state directory. Without root the template's
// user is the caller's, and the test is skipped.
func templateUserBackend(t *testing.T) (*local.Backend, string) {
	t.Helper()
	need.Root(t, "a template user other than the caller (sandboxes run as the caller when it is not root)")
	dir := t.TempDir()
	for p := dir; p != "/tmp" && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return newBackend(t, dir), dir
}

func create(t *testing.T, b *local.Backend, spec sandbox.Spec) *sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sh runs a shell script in the sandbox and returns stdout, stderr and the
// exit code.
func sh(t *testing.T, s *sandbox.Sandbox, script string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", script}}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return stdout.String(), stderr.String(), st.ExitCode
}

// bwrapProcesses lists host pids of bwrap processes whose command line
// names the sandbox (bwrap --hostname <id>).
func bwrapProcesses(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "bwrap" && strings.Contains(string(b), "\x00"+id+"\x00") {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}
