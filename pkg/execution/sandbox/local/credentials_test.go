package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// The host writes a credential into a running sandbox's own tmpfs, where
// only the sandbox's user reads it, replaces it atomically (a symlink the
// workload planted is replaced, never followed), and removes it.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := newBackend(t, dir)
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	path := sandbox.CredentialDir + "/token"

	if err := b.PutCredential(ctx, s.ID, "token", []byte("first-value")); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := sh(t, s, "cat "+path+"; echo; stat -c '%a %u' "+path+"; grep ' "+sandbox.CredentialDir+" ' /proc/mounts | cut -d' ' -f3")
	if code != 0 || out != "first-value\n400 0\ntmpfs\n" {
		t.Fatalf("in the sandbox: %q %q %d", out, stderr, code)
	}
	if _, _, code := sh(t, s, "ln -s /tmp/target "+sandbox.CredentialDir+"/planted"); code != 0 {
		t.Fatal("cannot plant a symlink")
	}
	if err := b.PutCredential(ctx, s.ID, "planted", []byte("second-value")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutCredential(ctx, s.ID, "token", []byte("third-value")); err != nil {
		t.Fatal(err)
	}
	out, _, _ = sh(t, s, "cat "+path+"; echo; test -L "+sandbox.CredentialDir+"/planted && echo link; test -e /tmp/target && echo followed; ls -a "+sandbox.CredentialDir)
	if out != "third-value\n.\n..\nplanted\ntoken\n" {
		t.Fatalf("after replacing: %q", out)
	}
	for _, bad := range []string{"", "../x", ".hidden", "a/b"} {
		if err := b.PutCredential(ctx, s.ID, bad, []byte("x")); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("PutCredential(%q) = %v, want ErrInvalidSpec", bad, err)
		}
	}

	for range 2 { // repeat-safe
		if err := b.RemoveCredential(ctx, s.ID, "token"); err != nil {
			t.Fatal(err)
		}
	}
	if out, _, _ := sh(t, s, "test -e "+path+" || echo gone"); out != "gone\n" {
		t.Errorf("after RemoveCredential: %q", out)
	}
	// Nothing of a credential is in the backend's state directory.
	assertNotIn(t, dir, "first-value", "third-value")

	if err := b.Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveCredential(ctx, s.ID, "token"); err != nil {
		t.Errorf("RemoveCredential of a deleted sandbox: %v", err)
	}
	if err := b.PutCredential(ctx, s.ID, "token", []byte("x")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("PutCredential of a deleted sandbox: %v", err)
	}
}

// A template's user reads its credential; the file is its own.
func TestCredentialsTemplateUser(t *testing.T) {
	b, _ := templateUserBackend(t)
	s := create(t, b, specFor(t, templateImage(t, "1000:1000", "machine-id")))
	if err := b.PutCredential(context.Background(), s.ID, "token", []byte("user-value")); err != nil {
		t.Fatal(err)
	}
	path := sandbox.CredentialDir + "/token"
	out, stderr, code := sh(t, s, "id -u; cat "+path+"; echo; stat -c '%a %u:%g' "+path)
	if code != 0 || out != "1000\nuser-value\n400 1000:1000\n" {
		t.Fatalf("as the template's user: %q %q %d", out, stderr, code)
	}
}

// assertNotIn fails when a file under dir holds one of values.
func assertNotIn(t *testing.T, dir string, values ...string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, v := range values {
			if strings.Contains(string(data), v) {
				t.Errorf("%s holds a credential", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
