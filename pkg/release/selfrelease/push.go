package selfrelease

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// push writes every index by digest (its blobs and manifests first), signs
// it and attaches its provenance and SBOM, then the release's files as one
// artifact by digest (REPOSITORY/slipway-release), and only once all of
// that has succeeded tags each index and the files with the version: a
// push the registry refuses part of leaves no version tag pointing at a
// partial release.
func (r *run) push(ctx context.Context) error {
	if !r.o.Push {
		return nil
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, r.o.RemoteOptions...)
	digests := make([]name.Digest, len(r.built))
	for i, b := range r.built {
		repo, err := name.NewRepository(b.repo)
		if err != nil {
			return err
		}
		digests[i] = repo.Digest(b.digest.String())
		r.logf("push %s", digests[i])
		if err := remote.WriteIndex(digests[i], b.index, opts...); err != nil {
			return fmt.Errorf("push %s: %w", digests[i], err)
		}
		// Read back: the registry holds the index under the digest reported.
		if desc, err := remote.Head(digests[i], opts...); err != nil || desc.Digest != b.digest {
			return fmt.Errorf("push %s: read back %v: %v", digests[i], desc, err)
		}
		if _, _, err := sign.SignAndAttest(ctx, digests[i], r.o.Signer, b.statements, sign.WithOfflineNoTlog()); err != nil {
			return fmt.Errorf("sign %s: %w", digests[i], err)
		}
		r.res.Images[i].Ref = digests[i].String()
	}
	files, filesImg, err := r.pushFiles(ctx, opts)
	if err != nil {
		return err
	}
	for i, b := range r.built {
		tag := digests[i].Context().Tag(r.o.Version)
		if err := remote.Tag(tag, b.index, opts...); err != nil {
			return fmt.Errorf("tag %s: %w", tag, err)
		}
		r.res.Images[i].Tag = tag.String()
	}
	tag := files.Context().Tag(r.o.Version)
	if err := remote.Tag(tag, filesImg, opts...); err != nil {
		return fmt.Errorf("tag %s: %w", tag, err)
	}
	r.res.Files.Tag = tag.String()
	return nil
}
