package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// Push writes img to repo (repo[:tag]) and returns repo[:tag]@digest: by
// digest, and under the tag too when one is given. Pushing the same image
// again changes nothing.
func Push(ctx context.Context, img v1.Image, repo string, opts ...remote.Option) (string, error) {
	r, err := ref.Parse(repo)
	if err != nil || r.IsPinned() {
		return "", fmt.Errorf("push to %q: want repository[:tag]: %v", repo, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	var dst name.Reference = r.Context().Digest(d.String())
	if r.Tag() != "" {
		dst = r.Context().Tag(r.Tag())
	}
	if err := remote.Write(dst, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return "", fmt.Errorf("push %s: %w", dst, err)
	}
	return r.WithDigest(d.String()).String(), nil
}

// WriteLayout adds img to the OCI image layout at dir (created when absent),
// annotated with refName. An image already there is not added twice.
func WriteLayout(dir string, img v1.Image, refName string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("oci layout %s: %w", dir, err)
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("oci layout %s: %w", dir, err)
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if idx, err := p.ImageIndex(); err == nil {
		if m, err := idx.IndexManifest(); err == nil {
			for _, desc := range m.Manifests {
				if desc.Digest == d {
					return nil
				}
			}
		}
	}
	var ann map[string]string
	if refName != "" {
		ann = map[string]string{"org.opencontainers.image.ref.name": refName}
	}
	if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return nil
}

// ImageFromDir makes a single-layer OCI image of a directory (for example
// Debian's busybox-static unpacked, or a debootstrap minbase): the way to
// make a base image on a machine without any registry to pull from. Same
// directory, same epoch, same digest.
func ImageFromDir(ctx context.Context, dir string, epoch time.Time, platform v1.Platform, env []string, opts ...rootfs.LayerOption) (v1.Image, func() error, error) {
	layer, _, err := rootfs.Layer(ctx, dir, append([]rootfs.LayerOption{rootfs.WithEpoch(epoch)}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("image from %s: %w", dir, err)
	}
	closeLayer := func() error {
		if c, ok := layer.(interface{ Close() error }); ok {
			return c.Close()
		}
		return nil
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch.UTC()}, CreatedBy: "slipway image from directory"},
	})
	if err != nil {
		closeLayer()
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		closeLayer()
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Created = v1.Time{Time: epoch.UTC()}
	cf.Config.Env = env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		closeLayer()
		return nil, nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), closeLayer, nil
}
