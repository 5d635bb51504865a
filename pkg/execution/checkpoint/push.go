package checkpoint

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
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// WithRemote reaches the registry of Push and Pull with opts (keychain,
// transport).
func WithRemote(opts ...remote.Option) Option {
	return func(o *options) error { o.remote = append(o.remote, opts...); return nil }
}

// WithSignOptions are the options of the signatures Push writes and Pull
// verifies (package sign: keychain, transport). Push and Pull always
// work offline, without a transparency log, as the runtime's key signs.
func WithSignOptions(opts ...sign.Option) Option {
	return func(o *options) error { o.sign = append(o.sign, opts...); return nil }
}

// Pushed is a checkpoint Push put in a registry.
type Pushed struct {
	// Ref is the checkpoint in the registry, by digest.
	Ref string `json:"ref"`
	// SignatureTag and AttestationTag are where its signature and its
	// signed attestation live (cosign's .sig and .att tags).
	SignatureTag   string `json:"signatureTag"`
	AttestationTag string `json:"attestationTag"`
}

// Push copies the checkpoint digest from st to the repository repo by
// digest (its layers, config and manifest, byte for byte), reads it back,
// signs it and attaches its in-toto attestation (PredicateType) with sv,
// as a release signs its images: cosign verify and verify-attestation
// accept them. It first checks what it publishes: the checkpoint's stored
// attestation must verify with sv, name it, and agree with its config,
// and each layer must hash to its digest; a checkpoint that does not is
// refused (ErrRefused) and nothing is pushed.
func Push(ctx context.Context, st *Store, digest string, repo name.Repository, sv signature.SignerVerifier, opts ...Option) (*Pushed, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if sv == nil {
		return nil, fmt.Errorf("%w: no signer", ErrInput)
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint id %q: %v", ErrInput, digest, err)
	}
	m, err := st.manifest(h)
	if err != nil {
		return nil, err
	}
	cfg, err := st.lp.Bytes(m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("%w: config %s of %s is missing", ErrRefused, m.Config.Digest, h)
	}
	envs, err := st.envelopes(h)
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: push %s: it has no signed attestation", ErrRefused, h)
	}
	var pred *Predicate
	var why []string
	for i, env := range envs {
		if pred, err = checkEnvelope(ctx, env, h, cfg, sv); err == nil {
			break
		}
		why = append(why, fmt.Sprintf("attestation %d: %v", i+1, err))
	}
	if pred == nil {
		return nil, fmt.Errorf("%w: push %s: no stored attestation holds with the signer's key: %s", ErrRefused, h, strings.Join(why, "; "))
	}
	if _, err := st.layers(h, m); err != nil {
		return nil, err
	}
	img, err := st.lp.Image(h)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: push %s: %w", h, err)
	}
	ref := repo.Digest(h.String())
	ro := append([]remote.Option{remote.WithContext(ctx)}, o.remote...)
	if err := remote.Write(ref, img, ro...); err != nil {
		return nil, fmt.Errorf("checkpoint: push %s: %w", ref, err)
	}
	// Read back: the registry holds the manifest under the digest pushed.
	if desc, err := remote.Head(ref, ro...); err != nil || desc.Digest != h {
		return nil, fmt.Errorf("checkpoint: push %s: read back %v: %v", ref, desc, err)
	}
	stmt, err := statement(h, pred, cfg)
	if err != nil {
		return nil, err
	}
	sres, ares, err := sign.SignAndAttest(ctx, ref, sv, [][]byte{stmt}, append(o.sign, sign.WithOfflineNoTlog())...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: sign %s: %w", ref, err)
	}
	return &Pushed{Ref: ref.String(), SignatureTag: sres.SignatureTag.String(), AttestationTag: ares[0].AttestationTag.String()}, nil
}

// statement is the in-toto statement of checkpoint h (as Create signs it).
func statement(h v1.Hash, pred *Predicate, cfg []byte) ([]byte, error) {
	st, err := attest.New("checkpoint/"+pred.RunID, h.String(), PredicateType, cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: attestation of %s: %w", h, err)
	}
	return attest.Marshal(st)
}

// Pull copies the checkpoint ref (by digest) from a registry into st,
// verifying before it writes anything: the registry's signature of ref
// and an attestation of PredicateType verify with v and name ref, the
// attestation's predicate is the checkpoint's config, and its tenant, run
// and generation are what exp asks; a checkpoint that does not hold is
// refused (ErrRefused, saying why) and st is unchanged. Each layer is
// checked against its digest before it is kept. The signed attestation is
// stored beside the checkpoint, so Restore verifies it again, as it does
// any checkpoint of st. A layer that fails midway leaves at most blobs no
// checkpoint lists (Collect removes them), never an entry of the index.
func Pull(ctx context.Context, st *Store, ref name.Digest, v signature.Verifier, exp Expect, opts ...Option) (*Checkpoint, error) {
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%w: no verifier", ErrInput)
	}
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInput, ref, err)
	}
	pub, err := readPublished(ctx, ref, h, v, o)
	if err != nil {
		return nil, err
	}
	raw, m, cfg, env, pred := pub.raw, pub.m, pub.cfg, pub.env, pub.pred
	if err := exp.check(h, pred, len(m.Layers)); err != nil {
		return nil, err
	}
	ro := append([]remote.Option{remote.WithContext(ctx)}, o.remote...)
	// Verified: only now is anything written.
	for i, l := range m.Layers {
		if l.Digest.Algorithm != "sha256" {
			return nil, fmt.Errorf("%w: %s: layer %d has digest %s, want sha256", ErrRefused, ref, i, l.Digest)
		}
		if err := layerType(l.MediaType); err != nil {
			return nil, fmt.Errorf("%w: %s: layer %d: %v", ErrRefused, ref, i, err)
		}
		if st.hasBlob(l.Digest) {
			continue
		}
		if err := st.pullBlob(ref.Context(), l, ro); err != nil {
			return nil, fmt.Errorf("checkpoint: pull %s: layer %d: %w", ref, i, err)
		}
	}
	// (A layer the store held already was checked when it was written;
	// Restore checks every layer against its digest again.)
	for _, b := range [][]byte{cfg, raw, env} {
		if _, err := st.writeBlob(b); err != nil {
			return nil, err
		}
	}
	eh, _, _ := v1.SHA256(bytes.NewReader(env))
	if err := st.append(v1.Descriptor{MediaType: EnvelopeMediaType, Digest: eh, Size: int64(len(env)),
		Annotations: map[string]string{AnnotationSubject: h.String()}}); err != nil {
		return nil, err
	}
	if err := st.append(v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactType, Digest: h, Size: int64(len(raw)),
		Annotations: map[string]string{AnnotationRun: pred.RunID}}); err != nil {
		return nil, err
	}
	return &Checkpoint{Digest: h.String(), Predicate: *pred}, nil
}

// published is a checkpoint read from a registry and verified.
type published struct {
	raw  []byte      // the manifest, as the registry holds it
	m    v1.Manifest // raw, parsed
	cfg  []byte      // the config blob
	env  []byte      // the signed attestation that holds
	pred *Predicate  // what it and the config say
}

// readPublished reads the checkpoint ref (whose digest is h) from its
// registry and verifies it without writing anything: the registry's
// signature of ref and an attestation of PredicateType verify with v and
// name ref, the manifest is a checkpoint hashing to h, and the
// attestation's predicate is its config. Any failure is ErrRefused, saying
// why, except the registry's own errors.
func readPublished(ctx context.Context, ref name.Digest, h v1.Hash, v signature.Verifier, o *options) (*published, error) {
	so := append(o.sign, sign.WithOfflineNoTlog())
	if _, err := sign.Verify(ctx, ref, v, so...); err != nil {
		return nil, fmt.Errorf("%w: %s: its signature does not verify: %v", ErrRefused, ref, err)
	}
	av, err := sign.VerifyAttestations(ctx, ref, v, so...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: its attestations do not verify: %v", ErrRefused, ref, err)
	}
	atts := av.Predicate(PredicateType)
	if len(atts) == 0 {
		return nil, fmt.Errorf("%w: %s has no verified attestation of %s", ErrRefused, ref, PredicateType)
	}
	ro := append([]remote.Option{remote.WithContext(ctx)}, o.remote...)
	desc, err := remote.Get(ref, ro...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", ref, err)
	}
	p := &published{raw: desc.Manifest}
	if got := sha(p.raw); got != h.Hex {
		return nil, fmt.Errorf("%w: %s: the registry's manifest hashes to sha256:%s", ErrRefused, ref, got)
	}
	if err := json.Unmarshal(p.raw, &p.m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrRefused, ref, err)
	}
	if p.m.ArtifactType != ArtifactType || p.m.Config.MediaType != ConfigMediaType {
		return nil, fmt.Errorf("%w: %s is not a checkpoint (artifact type %q, config %q)", ErrRefused, ref, p.m.ArtifactType, p.m.Config.MediaType)
	}
	if p.cfg, err = fetchBlob(ref.Context(), p.m.Config, ro); err != nil {
		return nil, err
	}
	var why []string
	for i, a := range atts {
		if p.pred, err = checkEnvelope(ctx, a.Envelope, h, p.cfg, v); err == nil {
			p.env = a.Envelope
			return p, nil
		}
		why = append(why, fmt.Sprintf("attestation %d: %v", i+1, err))
	}
	return nil, fmt.Errorf("%w: %s: no attestation holds: %s", ErrRefused, ref, strings.Join(why, "; "))
}

// Has says whether the store holds the manifest of the checkpoint digest
// (Verify says whether it is whole and to be trusted).
func (s *Store) Has(digest string) bool {
	h, err := v1.NewHash(digest)
	return err == nil && s.hasBlob(h)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// maxConfig bounds a checkpoint's config blob read from a registry.
const maxConfig = 1 << 20

// fetchBlob reads the small blob d of repo, checked against its digest.
func fetchBlob(repo name.Repository, d v1.Descriptor, ro []remote.Option) ([]byte, error) {
	if d.Size > maxConfig {
		return nil, fmt.Errorf("%w: %s: config of %d bytes, at most %d", ErrRefused, repo, d.Size, maxConfig)
	}
	l, err := remote.Layer(repo.Digest(d.Digest.String()), ro...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: pull %s@%s: %w", repo, d.Digest, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: pull %s@%s: %w", repo, d.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxConfig+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: pull %s@%s: %w", repo, d.Digest, err)
	}
	if got := sha(b); d.Digest.Algorithm != "sha256" || got != d.Digest.Hex {
		return nil, fmt.Errorf("%w: %s@%s: the registry's blob hashes to sha256:%s", ErrRefused, repo, d.Digest, got)
	}
	return b, nil
}

// pullBlob copies the layer d of repo into the store through a temporary
// file, kept only once it hashes to d's digest and size.
func (s *Store) pullBlob(repo name.Repository, d v1.Descriptor, ro []remote.Option) error {
	l, err := remote.Layer(repo.Digest(d.Digest.String()), ro...)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp := filepath.Join(s.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(tmp, "pull-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	hw := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, hw), io.LimitReader(rc, d.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(hw.Sum(nil)); got != d.Digest.Hex || n != d.Size {
		return fmt.Errorf("%w: the registry's blob %s hashes to sha256:%s (%d bytes, the manifest says %d)", ErrRefused, d.Digest, got, n, d.Size)
	}
	dir := filepath.Join(s.dir, "blobs", d.Digest.Algorithm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, d.Digest.Hex))
}
