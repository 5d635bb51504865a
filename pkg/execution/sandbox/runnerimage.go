package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/api/runnermeta"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// RunnerPath is where the runner binary lives, both in the runner image and
// inside every sandbox (mounted read-only).
const RunnerPath = "/usr/local/bin/slipway-runner"

// Labels of the runner image's config, named in the contract package
// runnermeta that release tooling reads too.
const (
	// LabelRunnerSHA256 is the hex sha256 of the runner binary: what the
	// identity proof compares with the hash of the running executable.
	LabelRunnerSHA256 = runnermeta.LabelSHA256
	// LabelRunnerProtocol is the runner protocol version the binary speaks
	// (runner.ProtocolVersion of its build), checked against a generation's
	// compatibility.runnerProtocol range.
	LabelRunnerProtocol = runnermeta.LabelProtocol
)

// RunnerFromFile describes the runner binary at path: its digest, and
// protocol (0: unknown) as given.
func RunnerFromFile(path string, protocol int) (RunnerBinary, error) {
	d, err := runner.FileDigest(path)
	if err != nil {
		return RunnerBinary{}, err
	}
	return RunnerBinary{Path: path, Digest: d, Protocol: protocol}, nil
}

// RunnerImage makes the runner's own OCI image: one layer holding the
// binary at RunnerPath (mode 0755, owned by root, times at epoch), and a
// config with LabelRunnerSHA256 and LabelRunnerProtocol. protocol is the
// version the binary speaks; 0 means runner.ProtocolVersion, right for a
// binary built from this module's source. opts are the layer's, after
// those (a release gives its gzip level and where the layer file goes).
// Same binary, epoch, platform and options, same digest. Call the returned
// function to remove the layer's temporary file once the image is written.
func RunnerImage(ctx context.Context, binary string, epoch time.Time, platform v1.Platform, protocol int, opts ...rootfs.LayerOption) (v1.Image, func() error, error) {
	if protocol == 0 {
		protocol = runner.ProtocolVersion
	}
	rb, err := RunnerFromFile(binary, protocol)
	if err != nil {
		return nil, nil, fmt.Errorf("runner image: %w", err)
	}
	stage, err := os.MkdirTemp("", "slipway-runner-image-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(stage)
	dst := filepath.Join(stage, filepath.FromSlash(strings.TrimPrefix(RunnerPath, "/")))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, nil, err
	}
	if err := copyFile(binary, dst, 0o755); err != nil {
		return nil, nil, fmt.Errorf("runner image: %w", err)
	}
	// The copy must be what was hashed.
	if d, err := runner.FileDigest(dst); err != nil || d != rb.Digest {
		return nil, nil, fmt.Errorf("runner image: %s changed while it was copied", binary)
	}
	// Every time at epoch, so that the layer does not depend on when it was made.
	for p := dst; p != stage; p = filepath.Dir(p) {
		if err := os.Chtimes(p, epoch, epoch); err != nil {
			return nil, nil, err
		}
	}
	lo := append([]rootfs.LayerOption{rootfs.WithEpoch(epoch), rootfs.WithOwner(0, 0), rootfs.WithMediaType(types.OCILayer)}, opts...)
	layer, _, err := rootfs.Layer(ctx, stage, lo...)
	if err != nil {
		return nil, nil, fmt.Errorf("runner image: %w", err)
	}
	closeLayer := func() error {
		if c, ok := layer.(io.Closer); ok {
			return c.Close()
		}
		return nil
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch.UTC()}, CreatedBy: "slipway runner image"},
	})
	if err == nil {
		var cf *v1.ConfigFile
		if cf, err = img.ConfigFile(); err == nil {
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
			cf.Created = v1.Time{Time: epoch.UTC()}
			cf.Config.Entrypoint = []string{RunnerPath}
			cf.Config.Labels = map[string]string{
				LabelRunnerSHA256:   strings.TrimPrefix(rb.Digest, "sha256:"),
				LabelRunnerProtocol: strconv.Itoa(protocol),
			}
			img, err = mutate.ConfigFile(img, cf)
		}
	}
	if err != nil {
		_ = closeLayer()
		return nil, nil, fmt.Errorf("runner image: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), closeLayer, nil
}

// UnpackRunner extracts a runner image into dir (absent or empty) and
// returns its binary, after checking that the binary's sha256 is the one
// the image's LabelRunnerSHA256 records (ErrIdentity otherwise).
func UnpackRunner(ctx context.Context, img v1.Image, dir string) (RunnerBinary, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return RunnerBinary{}, fmt.Errorf("runner image config: %w", err)
	}
	want := cf.Config.Labels[LabelRunnerSHA256]
	if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
		return RunnerBinary{}, fmt.Errorf("%w: runner image label %s is %q, not a hex sha256", ErrIdentity, LabelRunnerSHA256, want)
	}
	protocol, err := strconv.Atoi(cf.Config.Labels[LabelRunnerProtocol])
	if err != nil || protocol <= 0 {
		return RunnerBinary{}, fmt.Errorf("%w: runner image label %s is %q, not a protocol version", ErrIdentity, LabelRunnerProtocol, cf.Config.Labels[LabelRunnerProtocol])
	}
	if _, err := rootfs.Extract(ctx, img, dir); err != nil {
		return RunnerBinary{}, fmt.Errorf("unpack runner image: %w", err)
	}
	path := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(RunnerPath, "/")))
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return RunnerBinary{}, fmt.Errorf("%w: runner image has no regular file at %s", ErrIdentity, RunnerPath)
	}
	rb, err := RunnerFromFile(path, protocol)
	if err != nil {
		return RunnerBinary{}, err
	}
	if rb.Digest != "sha256:"+want {
		return RunnerBinary{}, fmt.Errorf("%w: %s in the runner image is %s, its label says sha256:%s", ErrIdentity, RunnerPath, rb.Digest, want)
	}
	return rb, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil { // umask
		out.Close()
		return err
	}
	return out.Close()
}
