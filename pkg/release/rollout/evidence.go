package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// PredicateEvidence is the predicate type of a rollout's proof evidence:
// an in-toto statement about the generation (subject: the generation, its
// id's sha256) saying which checks ran on which sandbox, when, by whom,
// and how they ended.
const PredicateEvidence = "https://slipway.dev/rollout-evidence/v1"

// Evidence file names in a rollout's evidence folder.
const (
	EvidenceFile       = "evidence.json"       // the checks, for people and `rollout status`
	EvidenceStatement  = "statement.json"      // the in-toto statement (unsigned evidence)
	EvidenceEnvelope   = "statement.dsse.json" // the statement in a DSSE envelope (signed evidence)
	evidenceFolderRoot = "evidence"
)

// evidenceDir is pools/<pool>/evidence/<generation>/<rollout>.
func evidenceDir(poolName, gen, rollout string) string {
	return path.Join(pool.Dir(poolName), evidenceFolderRoot, gen, rollout)
}

// EvidencePredicate is the predicate of PredicateEvidence.
type EvidencePredicate struct {
	Pool       string                `json:"pool"`
	Generation string                `json:"generation"`
	Rollout    string                `json:"rollout"`
	Driver     string                `json:"driver"`
	RunID      string                `json:"runId,omitempty"`
	SandboxID  string                `json:"sandboxId,omitempty"`
	Runtime    *runtimeapi.Info      `json:"runtime,omitempty"`
	Passed     bool                  `json:"passed"`
	Checks     []runtimeapi.Evidence `json:"checks"`
}

// evidence renders the proof result as files: the checks, and the in-toto
// statement signed into a DSSE envelope (or, with unsigned evidence
// chosen, the bare statement).
func (d *Driver) evidence(ctx context.Context, r *pool.Rollout, res *runtimeapi.ProofResult, info *runtimeapi.Info) (map[string][]byte, error) {
	checks := res.Evidence
	if checks == nil {
		checks = []runtimeapi.Evidence{}
	}
	list, err := json.MarshalIndent(checks, "", "  ")
	if err != nil {
		return nil, err
	}
	pred, err := json.Marshal(EvidencePredicate{Pool: d.Pool, Generation: r.To, Rollout: r.ID, Driver: d.Holder, RunID: res.RunID,
		SandboxID: res.SandboxID, Runtime: info, Passed: res.Passed(), Checks: checks})
	if err != nil {
		return nil, err
	}
	st, err := attest.New(path.Join(pool.Dir(d.Pool), "generations", r.To), "sha256:"+strings.TrimPrefix(r.To, "g-"), PredicateEvidence, pred)
	if err != nil {
		return nil, fmt.Errorf("rollout: evidence statement: %w", err)
	}
	stb, err := attest.Marshal(st)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{EvidenceFile: append(list, '\n')}
	if d.Signer == nil {
		out[EvidenceStatement] = stb
		return out, nil
	}
	env, err := sign.SignEnvelope(ctx, d.Signer, stb)
	if err != nil {
		return nil, fmt.Errorf("rollout: sign the evidence: %w", err)
	}
	out[EvidenceEnvelope] = env
	return out, nil
}

// readEvidence reads the checks of an evidence folder.
func readEvidence(t *gitops.Tree, dir string) ([]runtimeapi.Evidence, error) {
	b, err := t.ReadFile(path.Join(dir, EvidenceFile))
	if errors.Is(err, gitops.ErrNotExist) {
		return []runtimeapi.Evidence{}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []runtimeapi.Evidence
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, EvidenceFile), err)
	}
	return out, nil
}
