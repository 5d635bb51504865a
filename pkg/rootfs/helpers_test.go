package rootfs_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ent is one entry of a hand-built layer.
type ent struct {
	name  string
	typ   byte
	mode  int64
	body  string
	link  string
	uid   int
	gid   int
	size  int64 // declared size when larger than body: the stream ends after the header
	mtime time.Time
}

var t0 = time.Date(2019, 6, 1, 12, 0, 0, 0, time.UTC)

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, mode: 0o777, link: target}
}
func hardlink(name, target string) ent { return ent{name: name, typ: tar.TypeLink, link: target} }

// tarBytes writes the entries as a tar stream, as is: nothing is cleaned.
func tarBytes(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		mt := e.mtime
		if mt.IsZero() {
			mt = t0
		}
		size := int64(len(e.body))
		if e.typ != tar.TypeReg {
			size = 0
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link,
			Uid: e.uid, Gid: e.gid, ModTime: mt, Size: max(size, e.size), Format: tar.FormatPAX}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatalf("tar body %q: %v", e.name, err)
		}
		if e.size > size {
			return buf.Bytes() // a lie about the size: stop here
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerFromBytes(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func layerOf(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	return layerFromBytes(t, tarBytes(t, ents...))
}

func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// jail is a target directory beside a sentinel file, to prove that nothing
// is written next to the target.
type jail struct {
	parent, dir, sentinel string
}

func newJail(t testing.TB) jail {
	t.Helper()
	parent := t.TempDir()
	j := jail{parent: parent, dir: filepath.Join(parent, "root"), sentinel: filepath.Join(parent, "sentinel")}
	if err := os.WriteFile(j.sentinel, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return j
}

// check fails unless the parent holds exactly the target and the sentinel,
// unchanged.
func (j jail) check(t testing.TB) {
	t.Helper()
	names, err := os.ReadDir(j.parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n.Name() != "root" && n.Name() != "sentinel" {
			t.Errorf("written outside the target: %s", filepath.Join(j.parent, n.Name()))
		}
	}
	b, err := os.ReadFile(j.sentinel)
	if err != nil || string(b) != "untouched" {
		t.Errorf("sentinel changed: %q, %v", b, err)
	}
}

// describe lists every entry below dir with its type, mode, owner, size,
// content hash or link target, and its mtime passed through norm.
func describe(t testing.TB, dir string, norm func(time.Time) time.Time) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		var what string
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			what = fmt.Sprintf("file size=%d sha=%x nlink=%d", len(b), sha256.Sum256(b), st.Nlink)
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			what = "symlink -> " + target
		case info.IsDir():
			what = "dir"
		default:
			what = info.Mode().Type().String()
		}
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%s mode=%o owner=%d:%d mtime=%s", what,
			st.Mode&0o7777, st.Uid, st.Gid, norm(info.ModTime()).UTC().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func asIs(t time.Time) time.Time { return t }

// diffDescriptions reports the differences between two descriptions.
func diffDescriptions(want, got map[string]string) string {
	var lines []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			lines = append(lines, fmt.Sprintf("missing %s: %s", p, w))
		} else if g != w {
			lines = append(lines, fmt.Sprintf("%s:\n  want %s\n  got  %s", p, w, g))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, fmt.Sprintf("extra %s: %s", p, g))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// tarHeaders reads a layer's tar headers.
func tarHeaders(t testing.TB, l v1.Layer) []*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var hdrs []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

func sortStrings(s []string) []string { sort.Strings(s); return s }

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sha(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
