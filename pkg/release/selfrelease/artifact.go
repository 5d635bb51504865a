package selfrelease

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// FilesArtifactType is the artifactType of the OCI artifact holding a
// release's files (binaries, checksums.txt and its signature, SBOMs,
// provenance, policy), one layer per file titled with its name.
const FilesArtifactType = "application/vnd.slipway.release.files.v1"

// FilesRepository is the repository, under a push's registry, that the
// files artifact is pushed to (REGISTRY/slipway-release).
const FilesRepository = "slipway-release"

// emptyConfig is the OCI empty descriptor's content.
var emptyConfig = []byte("{}")

// Files is the files artifact of a pushed release.
type Files struct {
	Digest       string `json:"digest"`
	ArtifactType string `json:"artifactType"`
	Ref          string `json:"ref"`
	Tag          string `json:"tag,omitempty"`
	Files        int    `json:"files"`
}

// filesArtifact is the release's files in dir as one OCI artifact: every
// regular file of dir (the layout folder aside), in name order.
type filesArtifact struct {
	dir      string
	manifest []byte
	layers   map[v1.Hash]fileLayer
}

var _ partial.CompressedImageCore = (*filesArtifact)(nil)

func newFilesArtifact(dir string, annotations map[string]string) (*filesArtifact, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	a := &filesArtifact{dir: dir, layers: map[v1.Hash]fileLayer{}}
	cd := sha256.Sum256(emptyConfig)
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: FilesArtifactType,
		Config:      v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Size: int64(len(emptyConfig)), Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(cd[:])}},
		Annotations: annotations,
	}
	names := []string{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		sum, size, err := fileSHA256(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		l := fileLayer{path: filepath.Join(dir, n), digest: v1.Hash{Algorithm: "sha256", Hex: sum}, size: size, mediaType: fileMediaType(n)}
		a.layers[l.digest] = l
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: l.mediaType, Size: size, Digest: l.digest,
			Annotations: map[string]string{"org.opencontainers.image.title": n}})
	}
	if len(m.Layers) == 0 {
		return nil, fmt.Errorf("%s holds no release files", dir)
	}
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *filesArtifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *filesArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *filesArtifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *filesArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.layers[h]; ok {
		return l, nil
	}
	if h.Hex == hex.EncodeToString(sha256Sum(emptyConfig)) {
		return fileLayer{data: emptyConfig, digest: h, size: int64(len(emptyConfig)), mediaType: "application/vnd.oci.empty.v1+json"}, nil
	}
	return nil, fmt.Errorf("release files: no blob %s", h)
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// fileLayer is one file as a blob, read from disk when uploaded (a
// release's binaries are too big to hold in memory all at once).
type fileLayer struct {
	path      string
	data      []byte
	digest    v1.Hash
	size      int64
	mediaType types.MediaType
}

func (l fileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l fileLayer) Size() (int64, error)                { return l.size, nil }
func (l fileLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }
func (l fileLayer) Compressed() (io.ReadCloser, error) {
	if l.data != nil {
		return io.NopCloser(bytes.NewReader(l.data)), nil
	}
	return os.Open(l.path)
}

// fileMediaType is the media type of a release file, by its name.
func fileMediaType(n string) types.MediaType {
	switch {
	case strings.HasSuffix(n, ".spdx.json"):
		return "application/spdx+json"
	case strings.HasSuffix(n, ".intoto.json"), strings.HasSuffix(n, ".dsse.json"):
		return "application/vnd.in-toto+json"
	case strings.HasSuffix(n, ".yaml"):
		return "application/yaml"
	case strings.HasSuffix(n, ".txt"), strings.HasSuffix(n, ".sig"):
		return "text/plain"
	}
	return "application/octet-stream"
}

// pushFiles pushes the files of Out as one artifact to
// REPOSITORY/slipway-release by digest and returns its reference and
// image (tagged later, with the images).
func (r *run) pushFiles(ctx context.Context, opts []remote.Option) (name.Digest, v1.Image, error) {
	a, err := newFilesArtifact(r.res.Out, r.labels())
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("release files: %w", err)
	}
	img, err := partial.CompressedToImage(a)
	if err != nil {
		return name.Digest{}, nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, nil, err
	}
	repo, err := name.NewRepository(r.o.Repository + "/" + FilesRepository)
	if err != nil {
		return name.Digest{}, nil, err
	}
	ref := repo.Digest(d.String())
	r.logf("push %s (%d release files)", ref, len(a.layers))
	if err := remote.Write(ref, img, opts...); err != nil {
		return name.Digest{}, nil, fmt.Errorf("push %s: %w", ref, err)
	}
	if desc, err := remote.Head(ref, opts...); err != nil || desc.Digest != d {
		return name.Digest{}, nil, fmt.Errorf("push %s: read back %v: %v", ref, desc, err)
	}
	r.res.Files = &Files{Digest: d.String(), ArtifactType: FilesArtifactType, Ref: ref.String(), Files: len(a.layers)}
	return ref, img, nil
}
