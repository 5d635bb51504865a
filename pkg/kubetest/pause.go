package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/template"
)

// PauseRepository is where StartNode pushes the pause image in the tests'
// registry (tag KubeVersion).
const PauseRepository = "kubetest/pause"

// pushPause makes an image of the static pause binary (/pause, its
// entrypoint; times at epoch) and pushes it to registry as
// PauseRepository:KubeVersion, which it returns.
func pushPause(ctx context.Context, bin, registry string) (string, error) {
	stage, err := os.MkdirTemp("", "kubetest-pause-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	epoch := time.Unix(0, 0)
	dst := filepath.Join(stage, "pause")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return "", err
	}
	for _, p := range []string{dst, stage} {
		if err := os.Chtimes(p, epoch, epoch); err != nil {
			return "", err
		}
	}
	img, closeLayer, err := template.ImageFromDir(ctx, stage, epoch, v1.Platform{OS: "linux", Architecture: "amd64"}, nil)
	if err != nil {
		return "", fmt.Errorf("kubetest: pause image: %w", err)
	}
	defer closeLayer()
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cfg := cf.Config
	cfg.Entrypoint = []string{"/pause"}
	if img, err = mutate.Config(img, cfg); err != nil {
		return "", err
	}
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
