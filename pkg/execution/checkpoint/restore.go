package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// Expect is what a restore requires of a checkpoint.
type Expect struct {
	// Tenant must be the checkpoint's tenant.
	Tenant string
	// Generations are the generations whose checkpoints the target
	// sandbox takes: its own, and those its pool declares compatible. The
	// checkpoint's generation must be one of them.
	Generations []string
	// RunID, when set, must be the checkpoint's run.
	RunID string
}

// Verify checks the checkpoint digest in st before anything is restored
// from it: it is a checkpoint; an attestation of it verifies with v, names
// it as subject, has PredicateType and a predicate equal to its config; its
// tenant, run and generation are what exp asks. Any failure is ErrRefused,
// and the message says why.
func Verify(ctx context.Context, st *Store, digest string, v signature.Verifier, exp Expect) (*Checkpoint, error) {
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint id %q: %v", ErrInput, digest, err)
	}
	if v == nil {
		return nil, fmt.Errorf("%w: no verifier", ErrInput)
	}
	m, err := st.manifest(h)
	if err != nil {
		return nil, err
	}
	cfg, err := st.lp.Bytes(m.Config.Digest)
	if err != nil {
		return nil, fmt.Errorf("%w: config %s of %s is missing", ErrRefused, m.Config.Digest, h)
	}
	if ch, _, _ := v1.SHA256(bytes.NewReader(cfg)); ch != m.Config.Digest {
		return nil, fmt.Errorf("%w: config of %s hashes to %s, the manifest says %s", ErrRefused, h, ch, m.Config.Digest)
	}
	envs, err := st.envelopes(h)
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: %s has no signed attestation", ErrRefused, h)
	}
	var why []string
	var pred *Predicate
	for i, env := range envs {
		p, err := checkEnvelope(ctx, env, h, cfg, v)
		if err != nil {
			why = append(why, fmt.Sprintf("attestation %d: %v", i+1, err))
			continue
		}
		pred = p
		break
	}
	if pred == nil {
		return nil, fmt.Errorf("%w: %s: no attestation holds: %s", ErrRefused, h, strings.Join(why, "; "))
	}
	if err := exp.check(h, pred, len(m.Layers)); err != nil {
		return nil, err
	}
	return &Checkpoint{Digest: h.String(), Predicate: *pred}, nil
}

// check says whether the verified predicate of checkpoint h, whose
// manifest has layers layers, is what exp asks (ErrRefused, saying why).
func (exp Expect) check(h v1.Hash, pred *Predicate, layers int) error {
	if pred.Tenant != exp.Tenant {
		return fmt.Errorf("%w: %s is a checkpoint of tenant %q, not of tenant %q", ErrRefused, h, pred.Tenant, exp.Tenant)
	}
	if exp.RunID != "" && pred.RunID != exp.RunID {
		return fmt.Errorf("%w: %s is a checkpoint of run %s, not of run %s", ErrRefused, h, pred.RunID, exp.RunID)
	}
	if !slices.Contains(exp.Generations, pred.Generation) {
		return fmt.Errorf("%w: %s was taken on generation %s, which the target (generations %s) does not take", ErrRefused, h, pred.Generation, strings.Join(exp.Generations, ", "))
	}
	if pred.Layers != layers {
		return fmt.Errorf("%w: %s: the attestation says %d layers, the manifest has %d", ErrRefused, h, pred.Layers, layers)
	}
	return nil
}

// checkEnvelope verifies one DSSE envelope for subject h with config cfg.
func checkEnvelope(ctx context.Context, env []byte, h v1.Hash, cfg []byte, v signature.Verifier) (*Predicate, error) {
	stmt, err := sign.VerifyEnvelope(ctx, v, env)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if stmt.GetPredicateType() != PredicateType {
		return nil, fmt.Errorf("predicate type %q, want %q", stmt.GetPredicateType(), PredicateType)
	}
	named := false
	for _, s := range stmt.GetSubject() {
		if s.GetDigest()["sha256"] == h.Hex {
			named = true
		}
	}
	if !named {
		return nil, fmt.Errorf("its subject is not %s", h)
	}
	raw, err := protojson.Marshal(stmt.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	var signed, stored Predicate
	if err := json.Unmarshal(raw, &signed); err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	if err := json.Unmarshal(cfg, &stored); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !signed.Created.Equal(stored.Created) {
		return nil, fmt.Errorf("the signed predicate differs from the stored config")
	}
	signed.Created = stored.Created
	if signed != stored {
		return nil, fmt.Errorf("the signed predicate differs from the stored config")
	}
	return &signed, nil
}

// Restore verifies the checkpoint digest (Verify) and only then unpacks
// it into dir, which must be absent or empty, as safely as package rootfs
// unpacks templates: no path leaves dir, no device node is made, every
// layer is checked against its digest first. It returns the checkpoint,
// the Base that makes the next checkpoint of dir incremental, and what was
// written.
func Restore(ctx context.Context, st *Store, digest string, v signature.Verifier, exp Expect, dir string, opts ...rootfs.ExtractOption) (*Checkpoint, *Base, *rootfs.ExtractReport, error) {
	cp, err := Verify(ctx, st, digest, v, exp)
	if err != nil {
		return nil, nil, nil, err
	}
	h, _ := v1.NewHash(cp.Digest)
	m, err := st.manifest(h)
	if err != nil {
		return nil, nil, nil, err
	}
	layers, err := st.layers(h, m)
	if err != nil {
		return nil, nil, nil, err
	}
	rep, err := rootfs.ExtractLayers(ctx, layers, dir, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: restore %s into the workspace: %w", h, err)
	}
	tree, err := rootfs.Snapshot(dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: restore %s: %w", h, err)
	}
	return cp, &Base{digest: h, dir: dir, layers: len(m.Layers), tree: tree}, rep, nil
}
