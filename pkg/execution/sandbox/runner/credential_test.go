package runner_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// PutCredential makes its reader's data a 0400 file of the caller's,
// replaces one there atomically (a reader holding the old file keeps the
// old data), leaves no temporary file, and refuses a name that is not a
// plain file name or data too large, naming the file and never the data;
// RemoveCredential is repeat-safe.
func TestCredentialPutAndRemove(t *testing.T) {
	dir := t.TempDir()
	const secret1, secret2 = "swt_first-token-value", "swt_second-token-value"
	if err := runner.PutCredential(dir, "token", strings.NewReader(secret1)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "token")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o400 {
		t.Errorf("mode %v, want -r--------", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("owner %d, want %d", st.Uid, os.Geteuid())
	}
	if b, _ := os.ReadFile(p); string(b) != secret1 {
		t.Fatalf("content %q", b)
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	// A replace is a rename over the file (a new inode), not a rewrite:
	// the 0400 file could not be opened for writing anyway.
	if err := runner.PutCredential(dir, "token", strings.NewReader(secret2)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != secret2 {
		t.Fatalf("after the replace: %q", b)
	}
	b := make([]byte, 64)
	if n, _ := old.Read(b); string(b[:n]) != secret1 {
		t.Errorf("the file opened before the replace reads %q, want the old data", b[:n])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "token" {
		t.Errorf("files left: %v", entries)
	}

	for _, name := range []string{"", "a/b", "../token", "/etc/passwd", ".hidden", "nul\x00", strings.Repeat("x", 256)} {
		err := runner.PutCredential(dir, name, strings.NewReader(secret1))
		if !errors.Is(err, runner.ErrCredential) {
			t.Errorf("put %q: %v, want ErrCredential", name, err)
		}
		if err := runner.RemoveCredential(dir, name); !errors.Is(err, runner.ErrCredential) {
			t.Errorf("rm %q: %v, want ErrCredential", name, err)
		}
	}
	big := bytes.Repeat([]byte("s"), runner.MaxCredentialSize+1)
	if err := runner.PutCredential(dir, "big", bytes.NewReader(big)); !errors.Is(err, runner.ErrCredential) || strings.Contains(err.Error(), "sss") {
		t.Errorf("put of %d bytes: %v", len(big), err)
	}
	// A folder that cannot take it: the error names the file, not the data.
	err = runner.PutCredential(filepath.Join(dir, "missing"), "token", strings.NewReader(secret1))
	if err == nil || !strings.Contains(err.Error(), "token") || strings.Contains(err.Error(), secret1) {
		t.Errorf("put in a missing folder: %v", err)
	}

	for range 2 {
		if err := runner.RemoveCredential(dir, "token"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after rm: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
}

// InMemory takes a tmpfs and refuses a folder on a disk.
func TestCredentialInMemory(t *testing.T) {
	if err := runner.InMemory("/dev/shm"); err != nil {
		t.Logf("no tmpfs at /dev/shm here: %v", err)
	}
	var st syscall.Statfs_t
	wd, _ := os.Getwd()
	if err := syscall.Statfs(wd, &st); err == nil && st.Type != 0x01021994 {
		if err := runner.InMemory(wd); !errors.Is(err, runner.ErrCredential) {
			t.Errorf("InMemory(%s) on a disk: %v", wd, err)
		}
	}
}
