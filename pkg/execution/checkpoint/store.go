package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Store is where checkpoints live: an OCI image layout on the local disk
// (the local runtime keeps one under its state directory). Checkpoints are
// written by digest: their layers and configs are content-addressed blobs,
// so a layer two checkpoints share is stored once. Each checkpoint's
// manifest and its signed attestation are entries of the layout's index,
// the attestation's naming its subject (AnnotationSubject). A Store is safe
// for concurrent use by one process.
type Store struct {
	dir string
	lp  layout.Path
	mu  sync.Mutex // orders writes of index.json
}

// OpenStore opens the OCI layout at dir, making it when absent.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: store directory: required", ErrInput)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint: open store %s: %w", dir, err)
		}
		if lp, err = layout.Write(dir, empty.Index); err != nil {
			return nil, fmt.Errorf("checkpoint: make store %s: %w", dir, err)
		}
	}
	return &Store{dir: dir, lp: lp}, nil
}

// Dir is the layout's directory.
func (s *Store) Dir() string { return s.dir }

// index reads the layout's index manifest.
func (s *Store) index() (*v1.IndexManifest, error) {
	ii, err := s.lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read store index in %s: %w", s.dir, err)
	}
	return ii.IndexManifest()
}

// writeBlob stores data under its digest (a blob already there is kept).
func (s *Store) writeBlob(data []byte) (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := s.lp.WriteBlob(h, io.NopCloser(bytes.NewReader(data))); err != nil {
		return v1.Hash{}, fmt.Errorf("checkpoint: write blob %s: %w", h, err)
	}
	return h, nil
}

// keepLayer stores the layer l, whose digest is h: its file is linked into
// the store when it has one on the store's filesystem (Create's layers are
// written under the store's tmp), so its bytes are written once; else
// they are copied.
func (s *Store) keepLayer(l v1.Layer, h v1.Hash) error {
	if f, ok := l.(interface{ Path() string }); ok {
		dir := filepath.Join(s.dir, "blobs", h.Algorithm)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		err := os.Link(f.Path(), filepath.Join(dir, h.Hex))
		if err == nil || errors.Is(err, fs.ErrExist) {
			return nil
		}
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("read layer: %w", err)
	}
	return s.lp.WriteBlob(h, rc)
}

// hasBlob says whether the blob h is in the store.
func (s *Store) hasBlob(h v1.Hash) bool {
	_, err := os.Stat(filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex))
	return err == nil
}

// append adds a descriptor to the index, unless an equal one is there.
func (s *Store) append(d v1.Descriptor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	im, err := s.index()
	if err != nil {
		return err
	}
	for _, have := range im.Manifests {
		if have.Digest == d.Digest && have.Annotations[AnnotationSubject] == d.Annotations[AnnotationSubject] {
			return nil
		}
	}
	return s.lp.AppendDescriptor(d)
}

// manifest reads the checkpoint manifest of digest and checks it is one.
func (s *Store) manifest(digest v1.Hash) (*v1.Manifest, error) {
	rc, err := s.lp.Blob(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s in store %s", ErrNotFound, digest, s.dir)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", digest, err)
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(raw)); h != digest {
		return nil, fmt.Errorf("%w: manifest %s: its content hashes to %s", ErrRefused, digest, h)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrRefused, digest, err)
	}
	if m.ArtifactType != ArtifactType || m.Config.MediaType != ConfigMediaType {
		return nil, fmt.Errorf("%w: %s is not a checkpoint (artifact type %q, config %q)", ErrRefused, digest, m.ArtifactType, m.Config.MediaType)
	}
	return &m, nil
}

// List returns the checkpoints in the store, oldest first, with what
// their config blobs say (unverified: Verify says whether to trust them).
func (s *Store) List() ([]Checkpoint, error) {
	im, err := s.index()
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, d := range im.Manifests {
		if d.ArtifactType != ArtifactType {
			continue
		}
		m, err := s.manifest(d.Digest)
		if err != nil {
			return nil, err
		}
		p, err := s.predicate(m)
		if err != nil {
			return nil, err
		}
		out = append(out, Checkpoint{Digest: d.Digest.String(), Predicate: *p})
	}
	return out, nil
}

func (s *Store) predicate(m *v1.Manifest) (*Predicate, error) {
	rc, err := s.lp.Blob(m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("%w: config %s in store %s", ErrNotFound, m.Config.Digest, s.dir)
	}
	defer rc.Close()
	var p Predicate
	if err := json.NewDecoder(rc).Decode(&p); err != nil {
		return nil, fmt.Errorf("checkpoint: config %s: %w", m.Config.Digest, err)
	}
	return &p, nil
}

// envelopes returns the signed attestations stored for digest.
func (s *Store) envelopes(digest v1.Hash) ([][]byte, error) {
	im, err := s.index()
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, d := range im.Manifests {
		if d.MediaType != EnvelopeMediaType || d.Annotations[AnnotationSubject] != digest.String() {
			continue
		}
		b, err := s.lp.Bytes(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: attestation %s of %s: %w", d.Digest, digest, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// layers returns the checkpoint's layers, bottom first, each checked
// against its digest: a blob changed on disk is refused before anything is
// written from it. An uncompressed layer is read as the tar it is, whatever
// its first bytes look like (go-containerregistry guesses compression from
// them, and a tar written by GNU tar begins with its first name's raw
// bytes); a layer of a media type a checkpoint does not have is refused.
func (s *Store) layers(digest v1.Hash, m *v1.Manifest) ([]v1.Layer, error) {
	img, err := s.lp.Image(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s in store %s: %v", ErrNotFound, digest, s.dir, err)
	}
	ls, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: layers of %s: %w", digest, err)
	}
	for i, d := range m.Layers {
		if err := layerType(d.MediaType); err != nil {
			return nil, fmt.Errorf("%w: layer %d of %s: %v", ErrRefused, i, digest, err)
		}
		f, err := os.Open(filepath.Join(s.dir, "blobs", d.Digest.Algorithm, d.Digest.Hex))
		if err != nil {
			return nil, fmt.Errorf("%w: layer %d (%s) of %s is missing from the store", ErrRefused, i, d.Digest, digest)
		}
		h, n, err := v1.SHA256(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("checkpoint: read layer %d (%s) of %s: %w", i, d.Digest, digest, err)
		}
		if h != d.Digest || n != d.Size {
			return nil, fmt.Errorf("%w: layer %d of %s: the stored blob hashes to %s (%d bytes), the manifest says %s (%d bytes)", ErrRefused, i, digest, h, n, d.Digest, d.Size)
		}
		if d.MediaType == types.OCIUncompressedLayer {
			ls[i] = tarLayer{ls[i]}
		}
	}
	return ls, nil
}

// layerType says whether mt is a media type a checkpoint's layer has:
// LayerMediaType, or gzip (types.OCILayer) as checkpoints were first
// written.
func layerType(mt types.MediaType) error {
	if mt != LayerMediaType && mt != types.OCILayer {
		return fmt.Errorf("media type %q, want %q or %q", mt, LayerMediaType, types.OCILayer)
	}
	return nil
}

// tarLayer is an uncompressed layer read as stored: go-containerregistry
// guesses a layer's compression from its first bytes, which in a tar are
// the first entry's name, the workspace's to choose.
type tarLayer struct{ v1.Layer }

func (l tarLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }

// OfRun lists the checkpoints of runID in the store, oldest first.
func (s *Store) OfRun(runID string) ([]Checkpoint, error) {
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, c := range all {
		if c.Predicate.RunID == runID {
			out = append(out, c)
		}
	}
	return out, nil
}
