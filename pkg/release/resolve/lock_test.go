package resolve_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

func d(c string) string { return "sha256:" + strings.Repeat(c, 64) }

func TestLockRoundTripIsStable(t *testing.T) {
	l := resolve.NewLock()
	for s, c := range map[string]string{"nginx:1.25": "e", "127.0.0.1:5000/app:v2": "1", "127.0.0.1:5000/app:v1": "1", "busybox": "b"} {
		r := parse(t, s)
		l.Add(r, ref.PinOf(r, d(c), ref.Origin{Source: ref.SourceRegistry, Registry: r.Registry()}))
	}
	b1, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: slipway.dev/v1alpha1
kind: Lock
images:
- ref: 127.0.0.1:5000/app:v1
  resolved: 127.0.0.1:5000/app:v1@` + d("1") + `
  origin:
    source: registry
    registry: 127.0.0.1:5000
- ref: 127.0.0.1:5000/app:v2
  resolved: 127.0.0.1:5000/app:v2@` + d("1") + `
  origin:
    source: registry
    registry: 127.0.0.1:5000
- ref: busybox
  resolved: busybox@` + d("b") + `
  origin:
    source: registry
    registry: index.docker.io
- ref: nginx:1.25
  resolved: nginx:1.25@` + d("e") + `
  origin:
    source: registry
    registry: index.docker.io
`
	if string(b1) != want {
		t.Fatalf("lock bytes:\n%s", b1)
	}
	l2, err := resolve.ParseLock(b1)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := l2.Marshal()
	if string(b1) != string(b2) {
		t.Fatalf("round trip changed bytes:\n%s\n---\n%s", b1, b2)
	}
}

func TestParseLockRefuses(t *testing.T) {
	head := "apiVersion: slipway.dev/v1alpha1\nkind: Lock\nimages:\n"
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown field": {head + "- ref: a:1\n  resolved: a:1@" + d("a") + "\n  color: red\n", "line 6"},
		"no digest":     {head + "- ref: a:1\n  resolved: a:1\n", "line 4"},
		"bad ref":       {head + "- ref: A:1\n  resolved: a:1@" + d("a") + "\n", "line 4"},
		"other repo":    {head + "- ref: a:1\n  resolved: b:1@" + d("a") + "\n", "line 4"},
		"duplicate":     {head + "- ref: a:1\n  resolved: a:1@" + d("a") + "\n- ref: a:1\n  resolved: a:1@" + d("b") + "\n", "line 6"},
		"wrong kind":    {"apiVersion: slipway.dev/v1alpha1\nkind: Config\n", "kind"},
		"not yaml":      {"images: [\n", "line"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resolve.ParseLock([]byte(tc.doc))
			if !errors.Is(err, resolve.ErrLockInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrLockInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRecordThenHermetic(t *testing.T) {
	s := newServer(t, nil)
	want := s.push(t, "app:v1", randomImage(t))
	l := resolve.NewLock()
	r := resolve.Record(newRegistry(t), l)
	if _, err := r.Resolve(context.Background(), parse(t, s.host+"/app:v1")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "images.lock")
	if err := resolve.WriteLock(path, l); err != nil {
		t.Fatal(err)
	}
	s.Close() // hermetic resolution must not need the registry at all

	read, err := resolve.ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	h := resolve.Hermetic(read, "")
	p, err := h.Resolve(context.Background(), parse(t, s.host+"/app:v1"))
	if err != nil || p.Digest != want || p.Origin.Source != ref.SourceLock {
		t.Fatalf("hermetic: %+v %v", p, err)
	}
	_, err = h.Resolve(context.Background(), parse(t, s.host+"/app:v2"))
	if !errors.Is(err, resolve.ErrNotInLock) || !strings.Contains(err.Error(), s.host+"/app:v2") || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := resolve.Hermetic(read, "linux/arm64").Resolve(context.Background(), parse(t, s.host+"/app:v1")); !errors.Is(err, resolve.ErrNotInLock) {
		t.Fatalf("other platform must not match: %v", err)
	}
}

func TestReadLockMissingFile(t *testing.T) {
	_, err := resolve.ReadLock(filepath.Join(t.TempDir(), "nope.lock"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.lock") {
		t.Fatalf("err = %v", err)
	}
}
