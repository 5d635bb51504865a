package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// ErrNoEvidence marks a query that found no evidence folder.
var ErrNoEvidence = errors.New("rollout: no evidence")

// EvidenceQuery selects a pool's evidence in the config repository: every
// rollout's, or one generation's, or one rollout's.
type EvidenceQuery struct {
	Pool string
	// Branch is read at its head (default "main").
	Branch     string
	Generation string
	Rollout    string
	// Policy verifies when the repository holds no
	// policies/verification.yaml; the repository's policy wins.
	Policy *policy.Policy
}

// EvidenceCheck is one check of an evidence folder.
type EvidenceCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason"`
}

// EvidenceRecord is one rollout's evidence folder,
// pools/<pool>/evidence/<generation>/<rollout>/: what it says and, when
// verified, whether it may be believed.
type EvidenceRecord struct {
	Dir        string `json:"dir"`
	Generation string `json:"generation"`
	Rollout    string `json:"rollout"`
	// File is the statement read: the DSSE envelope, or the bare
	// statement of unsigned evidence ("" when the folder has neither).
	File   string `json:"file,omitempty"`
	Signed bool   `json:"signed"`
	// Verified: every check passed (set by VerifyEvidence only). Key is
	// the policy's key that verified the signature.
	Verified bool            `json:"verified"`
	Key      string          `json:"key,omitempty"`
	Checks   []EvidenceCheck `json:"checks,omitempty"`
	// Reason is the first failed check's, for a refused record.
	Reason string `json:"reason,omitempty"`
	// Evidence is the statement's predicate: verified after
	// VerifyEvidence, as read (not verified) after ReadEvidence. Nil when
	// it could not be decoded or was not trusted.
	Evidence *EvidencePredicate `json:"evidence,omitempty"`
}

// EvidenceReport lists the evidence a query selected.
type EvidenceReport struct {
	Pool string `json:"pool"`
	// Revision is the commit read.
	Revision string `json:"revision"`
	// Policy names the policy the signatures were checked against, and
	// its digest (VerifyEvidence only).
	Policy       string           `json:"policy,omitempty"`
	PolicyDigest string           `json:"policyDigest,omitempty"`
	Records      []EvidenceRecord `json:"records"`
	// Verified: every record verified (VerifyEvidence only).
	Verified bool `json:"verified"`
}

// ReadEvidence decodes the evidence a query selects without verifying it
// (`slipway evidence show`): the proofs, their results and times, as the
// statement says. VerifyEvidence says whether to believe it.
func ReadEvidence(ctx context.Context, repo *gitops.Repo, q EvidenceQuery) (*EvidenceReport, error) {
	return walkEvidence(ctx, repo, q, false)
}

// VerifyEvidence checks every evidence folder a query selects: its
// statement is in a DSSE envelope (unsigned evidence is refused) signed by
// a key of the repository's policies/verification.yaml (or q.Policy when
// the repository has none), of predicate type PredicateEvidence, about the
// folder's generation (subject name and sha256), from the folder's pool,
// generation and rollout, and the unsigned evidence.json beside it says
// the same. A refusal is a record with Verified false and the reason, not
// an error; errors are for what could not be read. No folder selected is
// ErrNoEvidence.
func VerifyEvidence(ctx context.Context, repo *gitops.Repo, q EvidenceQuery) (*EvidenceReport, error) {
	return walkEvidence(ctx, repo, q, true)
}

func walkEvidence(ctx context.Context, repo *gitops.Repo, q EvidenceQuery, verify bool) (*EvidenceReport, error) {
	if !pool.ValidName(q.Pool) {
		return nil, fmt.Errorf("rollout: %q is not a pool name", q.Pool)
	}
	if q.Branch == "" {
		q.Branch = "main"
	}
	t, rev, err := repo.Snapshot(ctx, q.Branch)
	if err != nil {
		return nil, err
	}
	rep := &EvidenceReport{Pool: q.Pool, Revision: rev, Records: []EvidenceRecord{}}
	var pol *policy.Policy
	if verify {
		pol, err = policy.ReadFrom(t.ReadFile, pool.PolicyPath, pool.PolicyPath+" in "+repo.URL())
		switch {
		case err == nil:
		case errors.Is(err, gitops.ErrNotExist) && q.Policy != nil:
			pol = q.Policy
		case errors.Is(err, gitops.ErrNotExist):
			return nil, fmt.Errorf("rollout: %s holds no %s: nothing to verify the evidence against (give a policy)", repo.URL(), pool.PolicyPath)
		default:
			return nil, err
		}
		rep.Policy, rep.PolicyDigest = pol.Metadata.Name, pol.Digest
	}
	root := path.Join(pool.Dir(q.Pool), evidenceFolderRoot)
	gens, err := t.List(root)
	if err != nil {
		return nil, err
	}
	for _, gen := range gens {
		if q.Generation != "" && gen != q.Generation {
			continue
		}
		rollouts, err := t.List(path.Join(root, gen))
		if err != nil {
			return nil, err
		}
		for _, ro := range rollouts {
			if q.Rollout != "" && ro != q.Rollout {
				continue
			}
			rec, err := readRecord(ctx, t, q.Pool, gen, ro, pol)
			if err != nil {
				return nil, err
			}
			rep.Records = append(rep.Records, *rec)
		}
	}
	if len(rep.Records) == 0 {
		what := "pool " + q.Pool
		if q.Generation != "" {
			what += ", generation " + q.Generation
		}
		if q.Rollout != "" {
			what += ", rollout " + q.Rollout
		}
		at := short(rev)
		if rev == "" {
			at = "an empty branch"
		}
		return nil, fmt.Errorf("%w for %s under %s/ at %s", ErrNoEvidence, what, root, at)
	}
	rep.Verified = verify
	for _, r := range rep.Records {
		rep.Verified = rep.Verified && r.Verified
	}
	return rep, nil
}

// readRecord reads one evidence folder; with pol, it verifies it.
func readRecord(ctx context.Context, t *gitops.Tree, poolName, gen, ro string, pol *policy.Policy) (*EvidenceRecord, error) {
	dir := evidenceDir(poolName, gen, ro)
	rec := &EvidenceRecord{Dir: dir, Generation: gen, Rollout: ro}
	check := func(name string, passed bool, format string, args ...any) bool {
		c := EvidenceCheck{Name: name, Passed: passed, Reason: fmt.Sprintf(format, args...)}
		rec.Checks = append(rec.Checks, c)
		if !passed && rec.Reason == "" {
			rec.Reason = name + ": " + c.Reason
		}
		return passed
	}
	read := func(name string) ([]byte, bool, error) {
		b, err := t.ReadFile(path.Join(dir, name))
		if errors.Is(err, gitops.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	env, signed, err := read(EvidenceEnvelope)
	if err != nil {
		return nil, err
	}
	bare, unsigned, err := read(EvidenceStatement)
	if err != nil {
		return nil, err
	}
	switch {
	case signed:
		rec.File, rec.Signed = path.Join(dir, EvidenceEnvelope), true
	case unsigned:
		rec.File = path.Join(dir, EvidenceStatement)
	}

	if pol == nil { // show: decode what the folder says
		var payload []byte
		switch {
		case signed:
			var e struct {
				Payload []byte `json:"payload"`
			}
			if json.Unmarshal(env, &e) == nil {
				payload = e.Payload
			}
		case unsigned:
			payload = bare
		}
		if st, err := attest.Parse(payload); err == nil {
			rec.Evidence, _ = decodePredicate(st)
		}
		if rec.Evidence == nil {
			rec.Reason = "no readable statement in " + dir
		}
		return rec, nil
	}

	if !check("envelope", signed, "%s", envelopeReason(signed, unsigned, dir)) {
		return rec, nil
	}
	st, key, err := pol.VerifyEnvelope(ctx, env)
	if !check("signature", err == nil, "%s", signatureReason(pol, key, err)) {
		return rec, nil
	}
	rec.Key = key
	if !check("predicateType", st.GetPredicateType() == PredicateEvidence, "%s", predicateReason(st.GetPredicateType())) {
		return rec, nil
	}
	if !check("subject", subjectIs(st, poolName, gen), "%s", subjectReason(st, poolName, gen)) {
		return rec, nil
	}
	pred, err := decodePredicate(st)
	if !check("predicate", err == nil && pred.Pool == poolName && pred.Generation == gen && pred.Rollout == ro, "%s", predicateFieldsReason(pred, err, poolName, gen, ro)) {
		return rec, nil
	}
	rec.Evidence = pred
	list, listed, err := read(EvidenceFile)
	if err != nil {
		return nil, err
	}
	if listed {
		var checks []runtimeapi.Evidence
		same := json.Unmarshal(list, &checks) == nil && sameChecks(checks, pred.Checks)
		reason := fmt.Sprintf("%s says what the signed statement says (%d checks)", EvidenceFile, len(pred.Checks))
		if !same {
			reason = EvidenceFile + " differs from the signed statement: it was changed after signing"
		}
		if !check("checks", same, "%s", reason) {
			return rec, nil
		}
	}
	rec.Verified = true
	return rec, nil
}

func envelopeReason(signed, unsigned bool, dir string) string {
	switch {
	case signed:
		return "a DSSE envelope: " + EvidenceEnvelope
	case unsigned:
		return "unsigned evidence: " + EvidenceStatement + " and no " + EvidenceEnvelope + " (the rollout was driven with --unsigned-evidence)"
	}
	return "neither " + EvidenceEnvelope + " nor " + EvidenceStatement + " in " + dir
}

func signatureReason(pol *policy.Policy, key string, err error) string {
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", ": ")
	}
	return fmt.Sprintf("verified with key %s of policy %s (%s)", key, pol.Metadata.Name, pol.Digest)
}

func predicateReason(got string) string {
	if got == PredicateEvidence {
		return got
	}
	return fmt.Sprintf("%q, want %s", got, PredicateEvidence)
}

// subjectIs reports whether the statement is about generation gen of the
// pool, as the driver writes it: one subject, the generation's file, the
// id's sha256.
func subjectIs(st *intoto.Statement, poolName, gen string) bool {
	s := st.GetSubject()
	return len(s) == 1 && s[0].GetName() == path.Join(pool.GenerationsDir(poolName), gen) &&
		strings.HasPrefix(gen, "g-") && s[0].GetDigest()["sha256"] == strings.TrimPrefix(gen, "g-")
}

func subjectReason(st *intoto.Statement, poolName, gen string) string {
	if subjectIs(st, poolName, gen) {
		return "the statement is about " + gen
	}
	var about []string
	for _, s := range st.GetSubject() {
		about = append(about, fmt.Sprintf("%s (sha256 %s)", s.GetName(), s.GetDigest()["sha256"]))
	}
	return fmt.Sprintf("the statement is about %s, not %s (the folder's generation)", strings.Join(about, ", "), gen)
}

func predicateFieldsReason(p *EvidencePredicate, err error, poolName, gen, ro string) string {
	switch {
	case err != nil:
		return err.Error()
	case p.Pool != poolName || p.Generation != gen || p.Rollout != ro:
		return fmt.Sprintf("the evidence is of pool %s, generation %s, rollout %s; the folder is pool %s, generation %s, rollout %s",
			p.Pool, p.Generation, p.Rollout, poolName, gen, ro)
	}
	verdict := "passed"
	if !p.Passed {
		verdict = "did not pass"
	}
	return fmt.Sprintf("rollout %s of generation %s by %s: the proofs %s", ro, gen, p.Driver, verdict)
}

func decodePredicate(st *intoto.Statement) (*EvidencePredicate, error) {
	if st.GetPredicate() == nil {
		return nil, errors.New("the statement has no predicate")
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	var p EvidencePredicate
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	if p.Checks == nil {
		p.Checks = []runtimeapi.Evidence{}
	}
	return &p, nil
}

// sameChecks compares the checks of evidence.json with the signed ones
// (times compared as instants).
func sameChecks(a, b []runtimeapi.Evidence) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Started.Equal(y.Started) || !x.Finished.Equal(y.Finished) {
			return false
		}
		x.Started, x.Finished, y.Started, y.Finished = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
