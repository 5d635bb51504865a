package sign

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
)

// Deleted lists what Delete removed, by digest reference.
type Deleted struct {
	// Image is the deleted image (empty if it was already gone).
	Image string `json:"image,omitempty"`
	// Signatures, Attestations and Referrers are the manifests of its
	// ".sig" and ".att" tags and its referrers (Sigstore bundles).
	Signatures   string   `json:"signatures,omitempty"`
	Attestations string   `json:"attestations,omitempty"`
	Referrers    []string `json:"referrers,omitempty"`
}

// Delete removes the image ref from its registry together with what signs
// and attests it: the ".sig" and ".att" tags (deleted by the digest they
// point to, which registries without tag deletion also accept) and its
// referrers. What is already gone is skipped, so a delete interrupted
// halfway can be run again. The registry must allow deletes. Options other
// than the keychain, transport and session are ignored.
func Delete(ctx context.Context, ref name.Digest, opts ...Option) (*Deleted, error) {
	if err := checkDigest(ref); err != nil {
		return nil, err
	}
	// Deleting checks no signature: the transparency-log choice does not
	// matter here and is not asked for.
	o, err := makeOptions(append([]Option{WithOfflineNoTlog()}, opts...))
	if err != nil {
		return nil, err
	}
	ggcr := o.ggcr(ctx)
	out := &Deleted{}
	// The attached manifests first: an image deleted before them would
	// leave them orphaned if this stopped halfway.
	for i, tagOf := range []func(name.Reference, ...ociremote.Option) (name.Tag, error){ociremote.SignatureTag, ociremote.AttestationTag} {
		tag, err := tagOf(ref, o.remote(ctx)...)
		if err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrRegistry, ref, err)
		}
		desc, err := remote.Head(tag, ggcr...)
		if notFound(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrRegistry, tag, err)
		}
		// The tag where the registry deletes tags (go-containerregistry's
		// keeps a tag apart from its digest), then the digest (the only
		// way on docker-registry, which refuses tag deletes).
		_ = remote.Delete(tag, ggcr...)
		d := tag.Context().Digest(desc.Digest.String())
		if err := remote.Delete(d, ggcr...); err != nil && !notFound(err) {
			return out, fmt.Errorf("%w: delete %s (%s): %w", ErrRegistry, tag, desc.Digest, err)
		}
		if _, err := remote.Head(tag, ggcr...); !notFound(err) {
			return out, fmt.Errorf("%w: %s is still there after deleting %s", ErrRegistry, tag, desc.Digest)
		}
		if i == 0 {
			out.Signatures = d.String()
		} else {
			out.Attestations = d.String()
		}
	}
	if idx, err := remote.Referrers(ref, ggcr...); err == nil {
		im, err := idx.IndexManifest()
		if err != nil {
			return out, fmt.Errorf("%w: referrers of %s: %w", ErrRegistry, ref, err)
		}
		for _, m := range im.Manifests {
			d := ref.Context().Digest(m.Digest.String())
			if err := remote.Delete(d, ggcr...); err != nil && !notFound(err) {
				return out, fmt.Errorf("%w: delete referrer %s: %w", ErrRegistry, d, err)
			}
			out.Referrers = append(out.Referrers, d.String())
		}
	} else if !notFound(err) {
		return out, fmt.Errorf("%w: referrers of %s: %w", ErrRegistry, ref, err)
	}
	if err := remote.Delete(ref, ggcr...); err != nil {
		if !notFound(err) {
			return out, fmt.Errorf("%w: delete %s: %w", ErrRegistry, ref, err)
		}
	} else {
		out.Image = ref.String()
	}
	return out, nil
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
