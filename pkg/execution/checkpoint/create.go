package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// Source is the workspace Create copies.
type Source struct {
	// Dir is the workspace as the host reaches it.
	Dir string
	// Freeze stops every process that could change Dir and returns the
	// function that lets them go on (the local backend's Freeze: the cgroup
	// freezer). Create calls it before it reads Dir and thaws once the
	// copy is taken, before it stores or signs anything. Nil means the
	// caller already holds Dir still.
	Freeze func(ctx context.Context) (thaw func() error, err error)
	// Taken, when set, is when the caller froze the sandbox to copy Dir
	// out of it (a workspace copied out of a pod: Dir is the runtime's
	// own copy, and Freeze is nil), the predicate's Created; Frozen is how
	// long the sandbox was held for that copy.
	Taken  time.Time
	Frozen time.Duration
}

// Base is what makes the next checkpoint of the same workspace
// incremental: the checkpoint it follows and the workspace's metadata at
// that moment. Create and Restore return one; it lives in memory only (a
// process that lost it writes its next checkpoint whole).
type Base struct {
	digest v1.Hash
	dir    string
	layers int
	tree   *rootfs.Tree
}

// Digest is the checkpoint the Base follows.
func (b *Base) Digest() string { return b.digest.String() }

// Option configures Create and Restore.
type Option func(*options) error

type options struct {
	signer    signature.SignerVerifier
	base      *Base
	maxLayers int
	now       func() time.Time
	remote    []remote.Option // Push and Pull: reaching the registry
	sign      []sign.Option   // Push and Pull: the signatures' registry options
}

func makeOptions(opts []Option) (*options, error) {
	o := &options{maxLayers: DefaultMaxLayers, now: time.Now}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// WithSigner signs the checkpoint's attestation with sv (required by
// Create).
func WithSigner(sv signature.SignerVerifier) Option {
	return func(o *options) error {
		if sv == nil {
			return fmt.Errorf("%w: nil signer", ErrInput)
		}
		o.signer = sv
		return nil
	}
}

// WithBase makes the checkpoint incremental on b: only what changed in the
// workspace since b goes into a new layer, b's layers are reused. A nil b,
// a b of another directory, or one whose chain is DefaultMaxLayers long
// gives a full checkpoint.
func WithBase(b *Base) Option {
	return func(o *options) error { o.base = b; return nil }
}

// WithMaxLayers bounds the chain of layers (default DefaultMaxLayers).
func WithMaxLayers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: max layers %d: want at least 1", ErrInput, n)
		}
		o.maxLayers = n
		return nil
	}
}

// withClock is a test hook for the time recorded.
func withClock(now func() time.Time) Option {
	return func(o *options) error { o.now = now; return nil }
}

func (m Meta) check() error {
	for _, f := range []struct{ name, v string }{
		{"RunID", m.RunID}, {"SandboxID", m.SandboxID}, {"Generation", m.Generation}, {"TemplateID", m.TemplateID},
	} {
		if f.v == "" {
			return fmt.Errorf("%w: Meta.%s: required", ErrInput, f.name)
		}
	}
	if _, err := v1.NewHash(m.TemplateID); err != nil {
		return fmt.Errorf("%w: Meta.TemplateID %q: %v", ErrInput, m.TemplateID, err)
	}
	return nil
}

// Create freezes src, copies its workspace into a new layer (only what
// changed since WithBase's checkpoint, when given), thaws it, and stores
// the checkpoint by digest in st with a signed in-toto attestation of
// PredicateType naming meta and the time of the freeze. It returns the
// checkpoint and the Base for the next one. Sockets in the workspace are
// left out (a layer cannot carry them); a device node fails the copy.
func Create(ctx context.Context, st *Store, src Source, meta Meta, opts ...Option) (*Checkpoint, *Base, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	if o.signer == nil {
		return nil, nil, fmt.Errorf("%w: no signer (WithSigner)", ErrInput)
	}
	if err := meta.check(); err != nil {
		return nil, nil, err
	}
	if src.Dir == "" {
		return nil, nil, fmt.Errorf("%w: Source.Dir: required", ErrInput)
	}
	base := o.base
	if base != nil && (base.dir != src.Dir || base.layers >= o.maxLayers || base.tree == nil) {
		base = nil
	}
	var parent *v1.Manifest
	if base != nil {
		if parent, err = st.manifest(base.digest); err != nil {
			base = nil // the parent is gone (collected): write a full one
		}
	}
	tmp := filepath.Join(st.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}

	start := time.Now()
	thaw := func() error { return nil }
	if src.Freeze != nil {
		if thaw, err = src.Freeze(ctx); err != nil {
			return nil, nil, fmt.Errorf("checkpoint: freeze sandbox %s: %w", meta.SandboxID, err)
		}
	}
	created := o.now().UTC()
	layer, rep, err := copyWorkspace(ctx, src.Dir, base, tmp)
	thawErr := thaw()
	frozen := time.Since(start)
	if !src.Taken.IsZero() {
		created, frozen = src.Taken.UTC(), src.Frozen
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: copy workspace of sandbox %s: %w", meta.SandboxID, err)
	}
	defer closeLayer(layer)
	if thawErr != nil {
		return nil, nil, fmt.Errorf("checkpoint: thaw sandbox %s: %w", meta.SandboxID, thawErr)
	}

	pred := Predicate{Meta: meta, Created: created, Entries: rep.Entries, Bytes: rep.UncompressedSize}
	var descs []v1.Descriptor
	if base != nil {
		descs = append(descs, parent.Layers...)
		pred.Parent, pred.Reused = base.digest.String(), len(parent.Layers)
	}
	var written int64
	if base == nil || rep.Entries > 0 {
		d := v1.Descriptor{MediaType: LayerMediaType, Digest: rep.Digest, Size: rep.Size}
		if !st.hasBlob(d.Digest) {
			if err := st.keepLayer(layer, d.Digest); err != nil {
				return nil, nil, fmt.Errorf("checkpoint: store layer %s: %w", d.Digest, err)
			}
			written += d.Size
		}
		descs = append(descs, d)
	}
	pred.Layers = len(descs)
	cp, err := st.commit(ctx, o.signer, pred, descs)
	if err != nil {
		return nil, nil, err
	}
	cp.Written += written
	cp.Frozen = frozen
	h, _ := v1.NewHash(cp.Digest)
	return cp, &Base{digest: h, dir: src.Dir, layers: len(descs), tree: rep.Tree}, nil
}

// copyWorkspace writes dir (or its change since base) as an uncompressed
// layer in tmp, hashed once as it is written; its report's Tree is dir as
// the copy found it, for the next one. The caller holds dir still.
func copyWorkspace(ctx context.Context, dir string, base *Base, tmp string) (v1.Layer, *rootfs.DiffReport, error) {
	lo := []rootfs.LayerOption{rootfs.WithTempDir(tmp), rootfs.WithMediaType(LayerMediaType)}
	var (
		l   v1.Layer
		rep *rootfs.DiffReport
		err error
	)
	if base != nil {
		l, rep, err = rootfs.Diff(ctx, base.tree, dir, lo...)
	} else {
		l, rep, err = rootfs.Layer(ctx, dir, lo...)
	}
	if err != nil {
		return nil, nil, err
	}
	return l, rep, nil
}

func closeLayer(l v1.Layer) {
	if c, ok := l.(io.Closer); ok {
		_ = c.Close()
	}
}

// commit stores the config, the signed attestation and the manifest.
func (s *Store) commit(ctx context.Context, sv signature.SignerVerifier, pred Predicate, layers []v1.Descriptor) (*Checkpoint, error) {
	cfg, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	cfgHash, err := s.writeBlob(cfg)
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType,
		Config: v1.Descriptor{MediaType: ConfigMediaType, Digest: cfgHash, Size: int64(len(cfg))},
		Layers: layers,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	mh, err := s.writeBlob(raw)
	if err != nil {
		return nil, err
	}
	st, err := attest.New("checkpoint/"+pred.RunID, mh.String(), PredicateType, cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: attestation of %s: %w", mh, err)
	}
	stmt, err := attest.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: attestation of %s: %w", mh, err)
	}
	env, err := sign.SignEnvelope(ctx, sv, stmt)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: sign attestation of %s: %w", mh, err)
	}
	eh, err := s.writeBlob(env)
	if err != nil {
		return nil, err
	}
	// The attestation is listed before the checkpoint: a listed
	// checkpoint always has its signed attestation.
	if err := s.append(v1.Descriptor{MediaType: EnvelopeMediaType, Digest: eh, Size: int64(len(env)),
		Annotations: map[string]string{AnnotationSubject: mh.String()}}); err != nil {
		return nil, err
	}
	if err := s.append(v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType, Digest: mh, Size: int64(len(raw)),
		Annotations: map[string]string{AnnotationRun: pred.RunID}}); err != nil {
		return nil, err
	}
	return &Checkpoint{Digest: mh.String(), Predicate: pred, Written: int64(len(cfg) + len(raw) + len(env))}, nil
}
