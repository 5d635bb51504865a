package selfrelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PublishOptions say where to publish a release built earlier.
type PublishOptions struct {
	// Repository is the images' registry prefix (host[/path]): the
	// images become REPOSITORY/<program>.
	Repository    string
	Signer        signature.SignerVerifier // required: a pushed release is signed
	RemoteOptions []remote.Option
	Log           io.Writer
}

// Publish pushes the images of the release in dir (what Release wrote to
// its Out, without pushing) as Release's push does: each index by digest,
// signed, with the provenance and SBOM statements the release kept, and
// every version tag last. It builds nothing: the indexes are read from the
// OCI layout, so their digests are the release's.
func Publish(ctx context.Context, dir string, o PublishOptions) (*Result, error) {
	start := time.Now()
	if o.Signer == nil {
		return nil, fmt.Errorf("%w: pushing needs a signing key: a pushed release is always signed", ErrRefused)
	}
	if o.Repository == "" {
		return nil, errors.New("publish: a repository is required")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	lp, err := layout.FromPath(filepath.Join(dir, LayoutDir))
	if err != nil {
		return nil, fmt.Errorf("publish %s: not a release (no OCI layout %s): %w", dir, LayoutDir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", dir, err)
	}
	r := &run{o: Options{Repository: strings.TrimSuffix(o.Repository, "/"), Push: true, Signer: o.Signer, RemoteOptions: o.RemoteOptions, Log: o.Log},
		res: &Result{Out: dir, Layout: LayoutDir}}
	for _, desc := range m.Manifests {
		ref := desc.Annotations["org.opencontainers.image.ref.name"]
		prog, version, ok := strings.Cut(ref, ":")
		if !ok || prog == "" || version == "" {
			return nil, fmt.Errorf("publish %s: layout entry %s has no ref.name PROGRAM:VERSION (%q)", dir, desc.Digest, ref)
		}
		if r.o.Version == "" {
			r.o.Version = version
		} else if version != r.o.Version {
			return nil, fmt.Errorf("publish %s: the layout holds versions %s and %s", dir, r.o.Version, version)
		}
		idx, err := top.ImageIndex(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %s: %w", dir, ref, err)
		}
		if r.src == nil { // the commit and its time, from the index's annotations
			im, err := idx.IndexManifest()
			if err != nil {
				return nil, fmt.Errorf("publish %s: %s: %w", dir, ref, err)
			}
			created, err := time.Parse("2006-01-02T15:04:05Z", im.Annotations["org.opencontainers.image.created"])
			if err != nil {
				return nil, fmt.Errorf("publish %s: %s: created: %w", dir, ref, err)
			}
			r.src = &source{commit: im.Annotations["org.opencontainers.image.revision"], epoch: created}
			r.res.Commit, r.res.Epoch = r.src.commit, created.Unix()
		}
		b := built{program: prog, repo: r.o.Repository + "/" + prog, index: idx, digest: desc.Digest}
		for _, f := range statementFiles(prog) {
			st, err := os.ReadFile(filepath.Join(dir, LayoutDir, StatementsDir, f))
			if err != nil {
				return nil, fmt.Errorf("publish %s: the statements of %s: %w", dir, prog, err)
			}
			b.statements = append(b.statements, st)
		}
		im := Image{Program: prog, Digest: desc.Digest.String(), Platforms: map[string]string{}}
		if im.Platforms, err = platformsOf(idx); err != nil {
			return nil, fmt.Errorf("publish %s: %s: %w", dir, ref, err)
		}
		r.built = append(r.built, b)
		r.res.Images = append(r.res.Images, im)
	}
	if len(r.built) == 0 {
		return nil, fmt.Errorf("publish %s: the OCI layout holds no image", dir)
	}
	r.res.Version = r.o.Version
	t0 := time.Now()
	if err := r.push(ctx); err != nil {
		return nil, err
	}
	r.res.Seconds.Push = time.Since(t0).Seconds()
	r.res.Seconds.Total = time.Since(start).Seconds()
	return r.res, nil
}

// platformsOf maps an index's platforms to their manifests' digests.
func platformsOf(idx v1.ImageIndex) (map[string]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range m.Manifests {
		if d.Platform != nil {
			out[d.Platform.String()] = d.Digest.String()
		}
	}
	return out, nil
}
