package kubetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PauseRepository is where StartNode pushes the pause image in the tests'
// registry (tag KubeVersion).
const PauseRepository = "kubetest/pause"

// pushPause makes an OCI image of the static pause binary (one layer
// holding /pause, mode 0755, owned by root, times at epoch; /pause its
// entrypoint) and pushes it to registry as PauseRepository:KubeVersion,
// which it returns. (kubetest imports no Slipway package, so it writes the
// one-file layer itself rather than through pkg/rootfs.)
func pushPause(ctx context.Context, bin, registry string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	epoch := time.Unix(0, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(b)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return "", err
	}
	if _, err := tw.Write(b); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", fmt.Errorf("kubetest: pause image layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/pause"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	ref := registry + "/" + PauseRepository + ":" + KubeVersion
	tag, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("kubetest: pause image reference %q: %w", ref, err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("kubetest: push pause image to %s: %w", ref, err)
	}
	return ref, nil
}
