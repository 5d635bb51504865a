package template

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

const minimal = `apiVersion: slipway.dev/v1alpha1
kind: WorkspaceTemplate
metadata:
  name: minimal
spec:
  base: BASE
  env: {PATH: /usr/local/bin:/usr/bin:/bin}
  workdir: /workspace
  user: "1000:1000"
  steps:
    - copy: {src: files/, dst: /opt/tools/}
    - run: ["/bin/sh", "-c", "echo hello > /opt/tools/hello"]
  refresh: [machine-id]
  tests:
    - name: hello
      run: ["/bin/sh", "-c", "test -f /opt/tools/hello && /opt/tools/greet.sh | grep -q 'hi hello'"]
    - name: runs-as-user
      run: ["/bin/sh", "-c", "test $(id -u) = 1000 && touch /workspace/x"]
`

var minimalFiles = map[string]string{"files/greet.sh": "#!/bin/sh\necho \"hi $(cat /opt/tools/hello)\"\n"}

func TestBuildMinimal(t *testing.T) {
	e := newEnv(t)
	file := e.writeSpec(t, minimal, minimalFiles)
	res, err := e.build(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.TemplateID, "sha256:") || !strings.HasPrefix(res.ContentID, "fs-") || len(res.ContentID) != 15 {
		t.Fatalf("ids %s %s", res.TemplateID, res.ContentID)
	}
	if res.BaseDigest != e.baseDigest || len(res.Tests) != 2 || !res.Tests[0].Passed || len(res.Inputs) != 1 || res.Inputs[0].Path != "files/greet.sh" {
		t.Fatalf("result %+v", res)
	}
	cf, err := res.Image.ConfigFile()
	must(t, err)
	l := cf.Config.Labels
	if l[templatemeta.LabelName] != "minimal" || l[templatemeta.LabelBaseDigest] != e.baseDigest || l[templatemeta.LabelRefresh] != "machine-id" || !strings.Contains(l[templatemeta.LabelTests], `"name":"hello"`) || l[templatemeta.LabelSpecDigest] != res.SpecDigest {
		t.Fatalf("labels %v", l)
	}
	if cf.Config.User != "1000:1000" || cf.Config.WorkingDir != "/workspace" || cf.Created.Unix() != 0 {
		t.Fatalf("config %+v", cf.Config)
	}
	if _, err := os.Stat(filepath.Join(res.Rootfs, "opt/tools/hello")); err != nil {
		t.Fatal("frozen rootfs lacks the step's output")
	}
	// The smoke test's own write is in its sandbox's private workspace, not in the frozen tree.
	if _, err := os.Lstat(filepath.Join(res.Rootfs, "workspace/x")); err == nil {
		t.Fatal("a test's write reached the frozen tree")
	}
	layers, _ := res.Image.Layers()
	d, _ := layers[len(layers)-1].Digest()
	if d.String() != res.Layer.Digest {
		t.Fatal("result layer digest mismatch")
	}

	again, err := e.build(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if again.TemplateID != res.TemplateID {
		t.Fatalf("two builds, two digests: %s %s", res.TemplateID, again.TemplateID)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"templateID":"`+res.TemplateID) {
		t.Fatalf("json %s", b)
	}
}

func TestBuildRefusesTagWithoutResolveBase(t *testing.T) {
	e := newEnv(t)
	file := e.writeSpec(t, strings.Replace(minimal, "base: BASE", "base: "+e.host+"/base:latest", 1), minimalFiles)
	_, err := e.build(t, file)
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "template.yaml:6: spec.base:") || !strings.Contains(err.Error(), "--resolve-base") {
		t.Fatalf("err = %v", err)
	}
	// With --resolve-base the pin is recorded.
	reg, _ := resolve.NewRegistry()
	must(t, tagBase(e))
	res, err := e.build(t, file, WithResolveBase(reg))
	if err != nil || res.BaseDigest != e.baseDigest || res.Base.Tag != "latest" {
		t.Fatalf("resolve-base: %+v %v", res, err)
	}
}

func TestBuildFailures(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		from, to string
		files    map[string]string
		want     error
		contains []string
	}{
		"failing step": {`["/bin/sh", "-c", "echo hello > /opt/tools/hello"]`, `["/bin/sh", "-c", "echo broken-step-output; exit 3"]`, minimalFiles, ErrStep,
			[]string{"template.yaml:12: step 2", "exit code 3", "broken-step-output"}},
		"failing test":            {"grep -q 'hi hello'", "grep -q 'nope'", minimalFiles, ErrTest, []string{"test hello", "exit code 1"}},
		"copy escapes by symlink": {"src: files/", "src: link/", map[string]string{"files/x": "x"}, ErrStep, []string{"template.yaml:11: step 1", "link/", "symlink"}},
		"planted private key": {`echo hello > /opt/tools/hello"]`, `echo hello > /opt/tools/hello; printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----\n' > /opt/tools/deploy_key"]`, minimalFiles, scan.ErrFindings,
			[]string{"/opt/tools/deploy_key", "refusing to freeze"}},
		"too big": {"  refresh: [machine-id]", "  refresh: [machine-id]\n  limits: {maxSize: 10}", minimalFiles, nil, []string{"over spec.limits.maxSize 10"}},
	} {
		t.Run(name, func(t *testing.T) {
			file := e.writeSpec(t, strings.Replace(minimal, tc.from, tc.to, 1), tc.files)
			if name == "copy escapes by symlink" {
				outside := t.TempDir()
				must(t, os.Symlink(outside, filepath.Join(filepath.Dir(file), "link")))
			}
			_, err := e.build(t, file)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			for _, c := range tc.contains {
				if !strings.Contains(err.Error(), c) {
					t.Errorf("error lacks %q: %v", c, err)
				}
			}
			if strings.Contains(err.Error(), "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU") {
				t.Fatal("secret value in the error")
			}
		})
	}
}

func TestBuildScrubsAndAllows(t *testing.T) {
	e := newEnv(t)
	spec := strings.Replace(minimal, `echo hello > /opt/tools/hello"]`,
		`echo hello > /opt/tools/hello; echo 'machine h login u password p4ssw0rdXyZ' > /root/.netrc; echo hist > /root/.ash_history; echo 'password = Zq8vN3xT7rL2mK9pW4sY6uB1' > /opt/tools/app.conf"]`, 1)
	file := e.writeSpec(t, spec, minimalFiles)
	if _, err := e.build(t, file); !errors.Is(err, scan.ErrFindings) || !strings.Contains(err.Error(), "/opt/tools/app.conf:1") {
		t.Fatalf("want a finding in app.conf: %v", err)
	}
	res, err := e.build(t, file, WithAllow(scan.Allow{Rule: scan.RuleHighEntropy, Path: "/opt/tools/*.conf"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scan.Allowed) != 1 {
		t.Fatalf("allowed finding not recorded: %+v", res.Scan)
	}
	removed := map[string]bool{}
	for _, s := range res.Scrubbed {
		removed[s.Path] = true
	}
	if !removed["/root/.netrc"] || !removed["/root/.ash_history"] {
		t.Fatalf("scrub report %+v", res.Scrubbed)
	}
	for _, p := range []string{"root/.netrc", "root/.ash_history"} {
		if _, err := os.Lstat(filepath.Join(res.Rootfs, p)); err == nil {
			t.Fatalf("%s shipped", p)
		}
	}
}

// A hostile base layer (an absolute path escaping the rootfs) refuses the
// build naming the entry, and nothing lands outside the work directory.
func TestBuildRefusesHostileBase(t *testing.T) {
	e := newEnv(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("owned\n")
	tw.WriteHeader(&tar.Header{Name: "/tmp/slipway-escape-" + filepath.Base(t.TempDir()), Mode: 0o644, Size: int64(len(body))})
	tw.Write(body)
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	must(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	must(t, err)
	ref, err := Push(context.Background(), img, e.host+"/hostile")
	must(t, err)
	file := e.writeSpec(t, strings.Replace(minimal, "base: BASE", "base: "+ref, 1), minimalFiles)
	_, err = e.build(t, file)
	if !errors.Is(err, rootfs.ErrUnsafeEntry) || !strings.Contains(err.Error(), "/tmp/slipway-escape-") {
		t.Fatalf("err = %v", err)
	}
}

func TestBuildKeepsWorkDirOnlyWhenAsked(t *testing.T) {
	e := newEnv(t)
	file := e.writeSpec(t, minimal, minimalFiles)
	res, err := e.build(t, file, WithKeepWorkDir())
	must(t, err)
	res.Close()
	if res.WorkDir == "" {
		t.Fatal("kept work dir not reported")
	}
	if _, err := os.Stat(filepath.Join(res.WorkDir, "frozen", "opt/tools/hello")); err != nil {
		t.Fatalf("kept work dir: %v", err)
	}
	os.RemoveAll(res.WorkDir)
	res, err = e.build(t, file)
	must(t, err)
	work := filepath.Dir(res.Rootfs)
	res.Close()
	if _, err := os.Stat(work); !os.IsNotExist(err) || res.WorkDir != "" {
		t.Fatalf("work dir %s left behind: %v", work, err)
	}
}
