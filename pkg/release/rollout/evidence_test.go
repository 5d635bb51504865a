package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// policyWith is a verification policy holding the named PEM keys.
func policyWith(keys map[string][]byte) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: agents}\nspec:\n  transparencyLog: none\n  keys:\n")
	var names []string
	for name, pem := range keys {
		names = append(names, name)
		b.WriteString("    - name: " + name + "\n      publicKey: |\n        " + strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\n        ") + "\n")
	}
	b.WriteString("  rules:\n    - name: images\n      signatures: {keys: [" + strings.Join(names, ", ") + "]}\n")
	return []byte(b.String())
}

// commitFiles writes (or, for nil, removes) files in one commit.
func (e *env) commitFiles(files map[string][]byte) {
	e.t.Helper()
	repo, err := gitops.Open(context.Background(), e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := repo.Update(context.Background(), gitops.Request{Branch: "main", Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		for p, b := range files {
			if b == nil {
				if err := t.Remove(p); err != nil {
					return nil, err
				}
			} else if err := t.WriteFile(p, b); err != nil {
				return nil, err
			}
		}
		return &gitops.Commit{Subject: "test edit"}, nil
	}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) verifyEvidence(q rollout.EvidenceQuery) *rollout.EvidenceReport {
	e.t.Helper()
	repo, err := gitops.Open(context.Background(), e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	q.Pool = "agents"
	rep, err := rollout.VerifyEvidence(context.Background(), repo, q)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// TestVerifyEvidence: the evidence a real rollout committed verifies
// against the repository's policy; a changed envelope, a changed
// evidence.json, a policy without the driver's key, a statement about
// another generation and unsigned evidence are each refused with the
// reason, and only that folder.
func TestVerifyEvidence(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	g2 := e.next(e.g1, templatemeta.Test{Name: "shell", Run: []string{"sh", "-c", "true"}})
	d := e.driver()
	if _, err := d.Start(ctx, g2.ID, false); err != nil {
		t.Fatal(err)
	}
	r, err := d.Run(ctx)
	if err != nil {
		t.Fatalf("run: %v (%+v)", err, r)
	}
	driverKey, err := sign.PublicKeyPEM(e.sv)
	if err != nil {
		t.Fatal(err)
	}
	otherPriv, _, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := sign.LoadSigner(otherPriv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := sign.PublicKeyPEM(other)
	goodPolicy := policyWith(map[string][]byte{"release": driverKey, "ops": otherKey})
	e.commitFiles(map[string][]byte{pool.PolicyPath: goodPolicy})

	// The evidence as the rollout committed it.
	rep := e.verifyEvidence(rollout.EvidenceQuery{})
	if !rep.Verified || len(rep.Records) != 1 {
		t.Fatalf("%+v", rep)
	}
	rec := rep.Records[0]
	var names []string
	for _, c := range rec.Checks {
		names = append(names, c.Name)
	}
	if rec.Generation != g2.ID || rec.Rollout != r.ID || rec.Dir != r.Evidence || rec.Key != "release" || !rec.Signed ||
		strings.Join(names, " ") != "envelope signature predicateType subject predicate checks" ||
		rec.Evidence == nil || !rec.Evidence.Passed || len(rec.Evidence.Checks) != len(pool.Proofs) || rec.Evidence.Checks[0].Started.IsZero() {
		t.Fatalf("record %+v", rec)
	}
	if rep := e.verifyEvidence(rollout.EvidenceQuery{Generation: g2.ID, Rollout: r.ID}); !rep.Verified || len(rep.Records) != 1 {
		t.Errorf("by generation and rollout: %+v", rep)
	}
	repo, _ := gitops.Open(ctx, e.repo)
	if _, err := rollout.VerifyEvidence(ctx, repo, rollout.EvidenceQuery{Pool: "agents", Rollout: "ro-nothing"}); !errors.Is(err, rollout.ErrNoEvidence) || !strings.Contains(err.Error(), "rollout ro-nothing") {
		t.Errorf("an unknown rollout: %v", err)
	}
	shown, err := rollout.ReadEvidence(ctx, repo, rollout.EvidenceQuery{Pool: "agents", Rollout: r.ID})
	if err != nil || len(shown.Records) != 1 || shown.Records[0].Evidence == nil || shown.Records[0].Evidence.Driver == "" || shown.Verified {
		t.Fatalf("show: %+v %v", shown, err)
	}

	envFile := path.Join(r.Evidence, rollout.EvidenceEnvelope)
	listFile := path.Join(r.Evidence, rollout.EvidenceFile)
	envelope := []byte(gittest.Git(t, e.repo, "show", "main:"+envFile))
	list := []byte(gittest.Git(t, e.repo, "show", "main:"+listFile) + "\n")

	// Another generation's statement, signed with the driver's key.
	var dsse struct {
		Payload []byte `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &dsse); err != nil {
		t.Fatal(err)
	}
	st, err := attest.Parse(dsse.Payload)
	if err != nil {
		t.Fatal(err)
	}
	pred, _ := json.Marshal(shown.Records[0].Evidence)
	forG1, err := attest.New(pool.GenerationsDir("agents")+"/"+e.g1.ID, "sha256:"+strings.TrimPrefix(e.g1.ID, "g-"), st.GetPredicateType(), pred)
	if err != nil {
		t.Fatal(err)
	}
	forG1b, _ := attest.Marshal(forG1)
	forG1env, err := sign.SignEnvelope(ctx, e.sv, forG1b)
	if err != nil {
		t.Fatal(err)
	}
	// A payload changed after signing (the proofs' result flipped).
	changed := strings.Replace(string(dsse.Payload), `"passed":true`, `"passed":false`, 1)
	if changed == string(dsse.Payload) {
		t.Fatalf("no passed field in %s", dsse.Payload)
	}
	var raw map[string]any
	json.Unmarshal(envelope, &raw)
	raw["payload"] = []byte(changed)
	tampered, _ := json.Marshal(raw)

	for _, tc := range []struct {
		name  string
		files map[string][]byte
		check string
		why   string
	}{
		{"tampered envelope", map[string][]byte{envFile: tampered}, "signature", "signed by no key of the verification policy (policy agents, keys "},
		{"tampered evidence.json", map[string][]byte{listFile: []byte(strings.Replace(string(list), `"passed": true`, `"passed": false`, 1))}, "checks", "evidence.json differs from the signed statement"},
		{"wrong key", map[string][]byte{pool.PolicyPath: policyWith(map[string][]byte{"ops": otherKey})}, "signature", "keys ops"},
		{"another generation", map[string][]byte{envFile: forG1env}, "subject", "the statement is about " + pool.GenerationsDir("agents") + "/" + e.g1.ID + " (sha256 " + strings.TrimPrefix(e.g1.ID, "g-") + "), not " + g2.ID},
		{"unsigned", map[string][]byte{envFile: nil, path.Join(r.Evidence, rollout.EvidenceStatement): dsse.Payload}, "envelope", "unsigned evidence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *e
			e.t = t
			e.commitFiles(tc.files)
			defer e.commitFiles(map[string][]byte{envFile: envelope, listFile: list, pool.PolicyPath: goodPolicy, path.Join(r.Evidence, rollout.EvidenceStatement): nil})
			rep := e.verifyEvidence(rollout.EvidenceQuery{Rollout: r.ID})
			if rep.Verified || len(rep.Records) != 1 {
				t.Fatalf("%+v", rep)
			}
			rec := rep.Records[0]
			last := rec.Checks[len(rec.Checks)-1]
			if rec.Verified || last.Passed || last.Name != tc.check || !strings.Contains(last.Reason, tc.why) || rec.Reason != tc.check+": "+last.Reason {
				t.Errorf("refusal %+v, want check %s saying %q", rec, tc.check, tc.why)
			}
			if tc.check != "envelope" && tc.check != "signature" && rec.Key != "release" {
				t.Errorf("key %q", rec.Key)
			}
		})
	}
	if rep := e.verifyEvidence(rollout.EvidenceQuery{}); !rep.Verified {
		t.Errorf("restored evidence: %+v", rep)
	}
}
