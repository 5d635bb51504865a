package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"

	"github.com/slipway-dev/slipway/testharness/need"
)

// A state directory under a parent only its owner may enter (as mktemp -d
// makes one) is out of reach of a template's user: Create refuses before
// it starts bwrap, naming the directory, its mode and what to do, and
// CheckTemplate says the same up front. A template that runs as root is
// not concerned.
func TestStateOutOfReachOfTemplateUser(t *testing.T) {
	need.Root(t, "sandboxes run as the caller when it is not root")
	setup(t)
	_, dir := templateUserBackend(t) // every parent of dir may be entered
	parent := filepath.Join(dir, "private")
	if err := os.Mkdir(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, filepath.Join(parent, "state"))
	img := templateImage(t, "1000:1000", "machine-id")
	_, err := b.Create(t.Context(), specFor(t, img))
	if !errors.Is(err, local.ErrUnreachable) || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Create under a 0700 parent: %v, want ErrUnreachable", err)
	}
	for _, want := range []string{parent + " is mode 0700", "uid 1000", "chmod o+x " + parent} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := b.CheckTemplate(img); !errors.Is(err, local.ErrUnreachable) {
		t.Errorf("CheckTemplate: %v, want ErrUnreachable", err)
	}
	if err := b.CheckTemplate(templateImage(t, "", "machine-id")); err != nil {
		t.Errorf("CheckTemplate of a root template: %v", err)
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckTemplate(img); err != nil {
		t.Errorf("CheckTemplate once the parent is 0711: %v", err)
	}
}

// The directories the Backend creates, parents included, are 0711 whatever
// the umask: a template's user can reach what is below them.
func TestStateDirectoriesReachable(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	base := t.TempDir()
	b, err := local.New(filepath.Join(base, "a", "b", "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, d := range []string{"a", "a/b", "a/b/state", "a/b/state/templates"} {
		fi, err := os.Stat(filepath.Join(base, d))
		if err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v, %v; want mode 0711", d, fi.Mode().Perm(), err)
		}
	}
}

// Nothing inside a sandbox names the host's layout: the command lines of
// the sandbox's pid 1 (a fork of bwrap) and of every other process there
// hold neither the state directory nor the template's unpacked root.
func TestNoHostPathsInside(t *testing.T) {
	setup(t)
	dir := t.TempDir()
	b := newBackend(t, dir)
	img := templateImage(t, "", "machine-id")
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	s := create(t, b, specFor(t, img))
	out, stderr, code := sh(t, s, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`)
	if code != 0 || !strings.Contains(out, "bwrap --args 3 --") {
		t.Fatalf("command lines inside: %q %q %d", out, stderr, code)
	}
	for _, host := range []string{dir, filepath.Join("templates", d.Hex)} {
		if strings.Contains(out, host) {
			t.Errorf("a command line inside names %s:\n%s", host, out)
		}
	}
}
