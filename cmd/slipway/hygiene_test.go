package main

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// maxTracked is the largest file the repository may track outside testdata/
// and fixtures/: a clone must not download build outputs.
const maxTracked = 1 << 20

// TestTrackedFilesAreSource fails when git tracks, outside testdata/ and
// fixtures/, a file over 1 MiB or an executable binary (ELF, Mach-O, PE, or
// an executable file that is not a script): build outputs belong in bin/ and
// dist/, which .gitignore keeps out.
func TestTrackedFilesAreSource(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var n int
	for _, rec := range strings.Split(string(out), "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		if !ok {
			t.Fatalf("git ls-files: unexpected record %q", rec)
		}
		if exempt(name) {
			continue
		}
		n++
		if msg := notSource("../../"+name, strings.HasPrefix(meta, "100755")); msg != "" {
			t.Errorf("%s: %s; build outputs go to bin/ or dist/ (ignored), test inputs under testdata/ or fixtures/", name, msg)
		}
	}
	if n < 100 {
		t.Fatalf("checked only %d tracked files: is this a git checkout?", n)
	}
}

func exempt(name string) bool {
	if strings.HasPrefix(name, "fixtures/") {
		return true
	}
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if path.Base(dir) == "testdata" {
			return true
		}
	}
	return false
}

// notSource says why the file at p is not source, or "".
func notSource(p string, executable bool) string {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return "" // a link, or deleted in the work tree
	}
	if fi.Size() > maxTracked {
		return "over 1 MiB"
	}
	f, err := os.Open(p)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	defer f.Close()
	head := make([]byte, 512)
	k, _ := f.Read(head)
	head = head[:k]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "an ELF binary"
	case bytes.HasPrefix(head, []byte{0xcf, 0xfa, 0xed, 0xfe}), bytes.HasPrefix(head, []byte{0xca, 0xfe, 0xba, 0xbe}):
		return "a Mach-O binary"
	case bytes.HasPrefix(head, []byte("MZ")):
		return "a PE binary"
	case executable && !bytes.HasPrefix(head, []byte("#!")):
		return "executable but not a script"
	}
	return ""
}

// TestNotSourceCatches proves the check above fails on what it exists for.
func TestNotSourceCatches(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		exec       bool
		want       string
	}{
		{"elf", "\x7fELF\x02\x01\x01", true, "an ELF binary"},
		{"pe", "MZ\x90\x00", false, "a PE binary"},
		{"blob", "\x00\x01\x02", true, "executable but not a script"},
		{"big", strings.Repeat("x", maxTracked+1), false, "over 1 MiB"},
		{"script", "#!/bin/sh\necho hi\n", true, ""},
		{"text", "package main\n", false, ""},
	} {
		p := dir + "/" + c.name
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := notSource(p, c.exec); got != c.want {
			t.Errorf("%s: notSource = %q, want %q", c.name, got, c.want)
		}
	}
}
