package local_test

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
)

// withWorkspaceFiles adds to img a layer with files in /workspace: a
// root-owned file of mode 0600, a directory, an executable and an absolute
// symlink out of the workspace.
func withWorkspaceFiles(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(1_700_000_000, 0)
	for _, h := range []*tar.Header{
		{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt},
		{Name: "workspace/readme", Typeflag: tar.TypeReg, Mode: 0o644, Size: 6, ModTime: mt},
		{Name: "workspace/private", Typeflag: tar.TypeReg, Mode: 0o600, Size: 6, ModTime: mt},
		{Name: "workspace/sub/", Typeflag: tar.TypeDir, Mode: 0o750, ModTime: mt},
		{Name: "workspace/sub/tool", Typeflag: tar.TypeReg, Mode: 0o755, Size: 6, ModTime: mt},
		{Name: "workspace/etc", Typeflag: tar.TypeSymlink, Linkname: "/etc", ModTime: mt},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("hello\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A bounded workspace (a tmpfs in the sandbox's own mount namespace) is
// seeded from the template like an unbounded one: contents, modes, times,
// symlinks as links, the workspace's own mode with owner rights added;
// owners kept for a root template, the template user's
// for a template with one (the only owner its user namespace maps).
func TestBoundsWorkspaceSeeded(t *testing.T) {
	setup(t)
	for _, tc := range []struct {
		user, owner string
	}{{"", "0"}, {"1000:1000", "1000"}} {
		t.Run("user="+tc.user, func(t *testing.T) {
			b := newBackend(t, t.TempDir())
			if tc.user != "" {
				b, _ = templateUserBackend(t)
			}
			spec := specFor(t, withWorkspaceFiles(t, templateImage(t, tc.user, "machine-id")))
			spec.Limits = sandbox.Limits{WorkspaceBytes: 4 << 20}
			s := create(t, b, spec)
			if mountedUnder(t, s.ID) {
				t.Error("the workspace tmpfs is on the host's mount table")
			}
			out, stderr, code := sh(t, s, `cd /workspace && stat -c '%n %a %u %Y' . readme private sub sub/tool && readlink etc && cat readme sub/tool && id -u`)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			want := strings.Join([]string{
				". 755 " + tc.owner + " 1700000000",
				"readme 644 " + tc.owner + " 1700000000",
				"private 600 " + tc.owner + " 1700000000",
				"sub 750 " + tc.owner + " 1700000000",
				"sub/tool 755 " + tc.owner + " 1700000000",
				"/etc", "hello", "hello", tc.owner, ""}, "\n")
			if out != want {
				t.Errorf("the seeded workspace:\n%s\nwant:\n%s", out, want)
			}
			if _, stderr, code := sh(t, s, `echo more >> /workspace/private && rm -r /workspace/sub && echo new > /workspace/new`); code != 0 {
				t.Errorf("the sandbox cannot write its workspace: %s", stderr)
			}
			u, _, err := b.DiskUsage(t.Context(), s.ID)
			if err != nil || u <= 0 {
				t.Errorf("DiskUsage = %d, %v", u, err)
			}
		})
	}
}
