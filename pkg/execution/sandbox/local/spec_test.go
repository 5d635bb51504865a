package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

func TestLabelsMatchTemplate(t *testing.T) {
	if local.LabelTemplateRefresh != templatemeta.LabelRefresh {
		t.Errorf("refresh label %q, template writes %q", local.LabelTemplateRefresh, templatemeta.LabelRefresh)
	}
}

func TestSetOwner(t *testing.T) {
	b := newBackend(t, t.TempDir())
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	ctx := context.Background()
	got, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-1")
	if err != nil || got.Owner != "claim-1" {
		t.Fatalf("SetOwner = %+v, %v", got, err)
	}
	if _, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-2"); !errors.Is(err, sandbox.ErrOwnerConflict) || !strings.Contains(err.Error(), `"claim-1"`) {
		t.Errorf("second claim of the same sandbox: %v", err)
	}
	if _, err := b.SetOwner(ctx, "sb-0000000000000000", sandbox.OwnerWarm, "claim-2"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("SetOwner of an unknown sandbox: %v", err)
	}
	if l, _ := b.List(ctx, sandbox.Filter{Owner: sandbox.OwnerWarm}); len(l) != 0 {
		t.Errorf("warm sandboxes after the claim: %v", l)
	}
}

// Create refuses what it cannot prove, and leaves nothing behind.
func TestCreateRefuses(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	img := templateImage(t, "", "machine-id")
	ctx := context.Background()

	bad := specFor(t, img)
	bad.Runner.Digest = "sha256:" + strings.Repeat("0", 64)
	if _, err := b.Create(ctx, bad); !errors.Is(err, sandbox.ErrIdentity) {
		t.Errorf("wrong runner digest: %v", err)
	}
	bad = specFor(t, img)
	bad.TemplateID = "sha256:" + strings.Repeat("1", 64)
	if _, err := b.Create(ctx, bad); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("wrong template id: %v", err)
	}
	bad = specFor(t, img)
	bad.Generation, bad.Network = "", "open"
	if _, err := b.Create(ctx, bad); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "Generation") || !strings.Contains(err.Error(), "Network") {
		t.Errorf("missing generation and unsupported network: %v", err)
	}

	// A runner binary that is not the one whose digest the spec names:
	// the copy in the state directory is checked, so swapping the file
	// under the path is refused too.
	fake := filepath.Join(t.TempDir(), "slipway-runner")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad = specFor(t, img)
	bad.Runner.Path = fake
	if _, err := b.Create(ctx, bad); !errors.Is(err, sandbox.ErrIdentity) {
		t.Errorf("swapped runner binary: %v", err)
	}

	// A runner that does not answer (a shell that exits) fails with its
	// output, and nothing is left.
	bad = specFor(t, img)
	bad.Runner, _ = sandbox.RunnerFromFile(fake, 1)
	_, err := b.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "before its runner answered") {
		t.Errorf("runner that exits at once: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sandboxes")); len(ents) != 0 {
		t.Errorf("a refused Create left %v", ents)
	}
}

func TestLimits(t *testing.T) {
	b := newBackend(t, t.TempDir())
	spec := specFor(t, templateImage(t, "", "machine-id"))
	spec.Limits = sandbox.Limits{NoFile: 256, FileSize: 1 << 20}
	s := create(t, b, spec)
	out, _, _ := sh(t, s, "ulimit -n; ulimit -f")
	if out != "256\n2048\n" { // ulimit -f counts 512-byte blocks
		t.Errorf("limits inside: %q", out)
	}
	if _, stderr, code := sh(t, s, "head -c 2000000 /dev/zero > /workspace/big"); code == 0 {
		t.Errorf("writing past FileSize succeeded: %q", stderr)
	}
}

// A template with a user runs its sandbox as that uid for real (an
// unprivileged bwrap), and the workspace is that user's.
func TestTemplateUser(t *testing.T) {
	b, dir := templateUserBackend(t)
	s := create(t, b, specFor(t, templateImage(t, "1000:1000", "machine-id,ssh-host-keys")))
	out, stderr, code := sh(t, s, "id -u; id -g; echo x > /workspace/mine && ls -ln /workspace/mine && touch /tmp/t; echo y > /etc/x")
	if !strings.HasPrefix(out, "1000\n1000\n") || !strings.Contains(out, " 1000 ") || code == 0 || !strings.Contains(stderr, "/etc/x") {
		t.Errorf("as the template's user: %q %q %d", out, stderr, code)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sandboxes", s.ID, "workspace", "mine")); err != nil || fi.Sys() == nil {
		t.Fatal(err)
	}
	if _, _, code := sh(t, s, "cat /etc/ssh/ssh_host_ed25519_key"); code == 0 {
		t.Error("the user can read the ssh host private key")
	}
}

// The identity proof does not rest on the runner's word: a runner that
// claims the expected digest but runs another binary is refused by the
// host's own look at /proc/<pid>/exe.
func TestLyingRunnerRefused(t *testing.T) {
	setup(t)
	work := t.TempDir()
	root := filepath.Join(work, "rootfs")
	if out, err := exec.Command("cp", "-a", fixtures.base, root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(root, "opt", "liar"), "./testdata/liar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build liar: %v %s", err, out)
	}
	// The "runner" the spec names is a script that execs the liar, which
	// claims the script's own digest.
	script := filepath.Join(work, "runner.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec /opt/liar /opt/claim \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rb, err := sandbox.RunnerFromFile(script, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "opt", "claim"), []byte(rb.Digest), 0o644); err != nil {
		t.Fatal(err)
	}
	img, _, err := template.ImageFromDir(context.Background(), root, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, t.TempDir())
	spec := specFor(t, img)
	spec.Runner = rb
	_, err = b.Create(context.Background(), spec)
	if !errors.Is(err, sandbox.ErrIdentity) || !strings.Contains(err.Error(), "the runner process runs") {
		t.Fatalf("lying runner: %v", err)
	}
}

// A template with nothing but a shell: the backend adds the mount points it
// needs (workspace, /etc/machine-id, the runner) to its unpacked copy, and
// skips host keys it cannot make, saying why.
func TestMinimalTemplate(t *testing.T) {
	setup(t)
	root := t.TempDir()
	for _, d := range []string{"bin", "etc/ssh"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(filepath.Join(fixtures.base, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "ls", "touch"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	img, _, err := template.ImageFromDir(context.Background(), root, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	c := cf.Config
	c.Labels = map[string]string{templatemeta.LabelRefresh: "ssh-host-keys"}
	if img, err = mutate.Config(img, c); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, t.TempDir())
	s := create(t, b, specFor(t, img))
	if s.Workdir != local.DefaultWorkdir {
		t.Errorf("workdir %q", s.Workdir)
	}
	out, stderr, code := sh(t, s, "cat /etc/machine-id; touch /workspace/ok && ls /workspace; echo $PATH")
	if code != 0 || len(out) != 33+3+len("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n") {
		t.Errorf("minimal template: %q %q %d", out, stderr, code)
	}
	if len(s.Refresh) != 2 || s.Refresh[1].Kind != "ssh-host-keys" || s.Refresh[1].Done || !strings.Contains(s.Refresh[1].Detail, "no ssh-keygen") {
		t.Errorf("refresh = %+v", s.Refresh)
	}
}

// A state directory deeper than a unix socket path may be long (108
// bytes) still works: the socket is reached through /proc/self/fd.
func TestLongStatePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("deep-", 20))
	b := newBackend(t, dir)
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	if out, _, code := sh(t, s, "echo ok"); out != "ok\n" || code != 0 {
		t.Errorf("exec: %q %d", out, code)
	}
}

// An owner change survives a new Backend on the same directory, whether it
// was recorded in the directory's xattr (the default where the file system
// takes user xattrs) or in sandbox.json (where it does not), and whichever
// way the new Backend records them.
func TestOwnerSurvivesRestart(t *testing.T) {
	inRecord := []local.Option{local.WithOwnerInRecord()}
	for _, tc := range []struct {
		name          string
		first, second []local.Option
	}{
		{"attr", nil, nil},
		{"record", inRecord, inRecord},
		{"attr then record", nil, inRecord},
		{"record then attr", inRecord, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := newBackend(t, dir, tc.first...)
			if tc.first == nil && !local.OwnerInAttr(b) {
				t.Skip("this file system takes no user xattrs: the record case covers it")
			}
			ctx := context.Background()
			s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
			if _, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-1"); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b2 := newBackend(t, dir, tc.second...)
			if got, err := b2.List(ctx, sandbox.Filter{Owner: "claim-1"}); err != nil || len(got) != 1 || got[0].ID != s.ID {
				t.Fatalf("List(owner claim-1) after restart = %v, %v", got, err)
			}
			if _, err := b2.SetOwner(ctx, s.ID, sandbox.OwnerWarm, "claim-2"); !errors.Is(err, sandbox.ErrOwnerConflict) {
				t.Errorf("taking the claimed sandbox as warm after restart: %v", err)
			}
			if _, err := b2.SetOwner(ctx, s.ID, "claim-1", "retiring"); err != nil {
				t.Fatal(err)
			}
			if got, err := b2.List(ctx, sandbox.Filter{Owner: "retiring"}); err != nil || len(got) != 1 {
				t.Fatalf("List(owner retiring) = %v, %v", got, err)
			}
			if err := b2.Delete(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSetOwnerRefusesAnOverlongOwner(t *testing.T) {
	b := newBackend(t, t.TempDir())
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	ctx := context.Background()
	if _, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, strings.Repeat("x", 256)); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("a 256-byte owner: %v", err)
	}
	if got, err := b.SetOwner(ctx, s.ID, sandbox.OwnerWarm, strings.Repeat("x", 255)); err != nil || got.Owner != strings.Repeat("x", 255) {
		t.Errorf("a 255-byte owner: %+v, %v", got, err)
	}
	if got, err := b.List(ctx, sandbox.Filter{Owner: strings.Repeat("x", 255)}); err != nil || len(got) != 1 {
		t.Errorf("List by the 255-byte owner: %v, %v", got, err)
	}
}
