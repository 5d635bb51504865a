package sandbox_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

var linux = v1.Platform{OS: "linux", Architecture: "amd64"}

func fakeRunner(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slipway-runner")
	if err := os.WriteFile(p, []byte(content), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunnerImage(t *testing.T) {
	ctx := context.Background()
	bin := fakeRunner(t, "not really a runner\n")
	rb, err := sandbox.RunnerFromFile(bin, 0)
	if err != nil {
		t.Fatal(err)
	}
	img, done, err := sandbox.RunnerImage(ctx, bin, time.Unix(1700000000, 0), linux, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	// Same binary, epoch and platform: same digest, even from another path
	// with other times.
	bin2 := fakeRunner(t, "not really a runner\n")
	_ = os.Chtimes(bin2, time.Now(), time.Now())
	img2, done2, err := sandbox.RunnerImage(ctx, bin2, time.Unix(1700000000, 0), linux, runner.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer done2()
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("digests differ: %s %s", d1, d2)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := "sha256:" + cf.Config.Labels[sandbox.LabelRunnerSHA256]; got != rb.Digest {
		t.Errorf("label %s, binary %s", got, rb.Digest)
	}
	if cf.Config.Labels[sandbox.LabelRunnerProtocol] != "1" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("config = %+v", cf)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers", len(layers))
	}
	rc, _ := layers[0].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: owner %d:%d, time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "usr/local/bin/slipway-runner" && h.Mode&0o777 != 0o755 {
			t.Errorf("runner mode %o", h.Mode)
		}
	}
	if strings.Join(names, " ") != "usr/ usr/local/ usr/local/bin/ usr/local/bin/slipway-runner" {
		t.Errorf("layer holds %v", names)
	}

	got, err := sandbox.UnpackRunner(ctx, img, filepath.Join(t.TempDir(), "unpacked"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != rb.Digest || got.Protocol != runner.ProtocolVersion || !strings.HasSuffix(got.Path, sandbox.RunnerPath) {
		t.Errorf("UnpackRunner = %+v", got)
	}
}

func TestUnpackRunnerRefusesAMismatch(t *testing.T) {
	ctx := context.Background()
	img, done, err := sandbox.RunnerImage(ctx, fakeRunner(t, "a"), time.Unix(0, 0), linux, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	cf, _ := img.ConfigFile()
	for name, labels := range map[string]map[string]string{
		"other binary's hash": {sandbox.LabelRunnerSHA256: strings.Repeat("0", 64), sandbox.LabelRunnerProtocol: "1"},
		"no hash":             {sandbox.LabelRunnerProtocol: "1"},
		"no protocol":         {sandbox.LabelRunnerSHA256: cf.Config.Labels[sandbox.LabelRunnerSHA256]},
	} {
		c := cf.Config
		c.Labels = labels
		bad, err := mutate.Config(img, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sandbox.UnpackRunner(ctx, bad, filepath.Join(t.TempDir(), "x")); !errors.Is(err, sandbox.ErrIdentity) {
			t.Errorf("%s: %v, want ErrIdentity", name, err)
		}
	}
}

func TestFilter(t *testing.T) {
	s := &sandbox.Sandbox{Pool: "p", Generation: "g-1", Owner: "warm", State: sandbox.StateRunning}
	for _, tt := range []struct {
		f    sandbox.Filter
		want bool
	}{
		{sandbox.Filter{}, true},
		{sandbox.Filter{Pool: "p", Generation: "g-1", Owner: "warm", State: sandbox.StateRunning}, true},
		{sandbox.Filter{Pool: "q"}, false},
		{sandbox.Filter{Generation: "g-2"}, false},
		{sandbox.Filter{Owner: "claim-1"}, false},
		{sandbox.Filter{State: sandbox.StateDead}, false},
	} {
		if got := tt.f.Match(s); got != tt.want {
			t.Errorf("%+v.Match = %v", tt.f, got)
		}
	}
}

func TestDeadSandboxHasNoRunner(t *testing.T) {
	s := &sandbox.Sandbox{ID: "sb-1", State: sandbox.StateDead}
	ctx := context.Background()
	if _, err := s.Ping(ctx); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Error(err)
	}
	if _, err := s.Identity(ctx); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Error(err)
	}
	if _, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Error(err)
	}
}
