package cli

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

func TestPoolShowSetCLI(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "config.git")
	if r := run(t, "", "config", "init", repo, "--pool", "agents"); r.code != 0 {
		t.Fatal(r)
	}
	r := run(t, "", "pool", "show", "--repo", repo, "--pool", "agents")
	if r.code != 0 || !strings.Contains(r.stdout, "  warmSize                       2\n") || !strings.Contains(r.stdout, "  phaseDeadlines.warm            5m\n") {
		t.Fatalf("show: %+v", r)
	}

	r = run(t, "", "pool", "set", "--repo", repo, "--pool", "agents", "warmSize=4", "phaseDeadlines.warm=10m", "onDrainDeadline=stop", "--message", "bigger templates")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "committed ") || !strings.Contains(r.stdout, "  warmSize: 2 -> 4\n") {
		t.Fatalf("set: %+v", r)
	}
	msg := gittest.Git(t, repo, "log", "-1", "--format=%B", "main")
	if !strings.Contains(msg, "bigger templates") || !strings.Contains(msg, "Slipway-Pool: agents") || !strings.Contains(msg, "Slipway-Step: pool-set") {
		t.Errorf("commit message:\n%s", msg)
	}
	head := gittest.Git(t, repo, "rev-parse", "main")

	r = run(t, "", "pool", "set", "--repo", repo, "--pool", "agents", "warmSize=4", "--output", "json")
	var res struct {
		Status  string        `json:"status"`
		Changes []pool.Change `json:"changes"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Status != "unchanged" || len(res.Changes) != 0 {
		t.Fatalf("repeat: %+v", r)
	}
	for _, bad := range [][]string{{"warmsize=4"}, {"phaseDeadlines.warm=5 min"}, {"network=open"}, {"warmSize"}} {
		r := run(t, "", append([]string{"pool", "set", "--repo", repo, "--pool", "agents"}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("%v: %+v", bad, r)
		}
	}
	if got := gittest.Git(t, repo, "rev-parse", "main"); got != head {
		t.Error("an unchanged or refused set moved the branch")
	}

	r = run(t, "", "pool", "show", "--repo", repo, "--pool", "agents", "--output", "json")
	var shown struct {
		Revision string         `json:"revision"`
		Spec     pool.Spec      `json:"spec"`
		Settings []pool.Setting `json:"settings"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &shown) != nil || shown.Revision != head || shown.Spec.WarmSize != 4 || shown.Spec.OnDrainDeadline != "stop" {
		t.Fatalf("show json: %+v", r)
	}
}

// TestEvidenceCLI: verify exits 0 on evidence signed by a key of the
// repository's policy and 1 (with the reason) once evidence.json no
// longer says what was signed; 2 when there is nothing to verify. Show
// prints the checks. (The library test verifies a real rollout's
// evidence; this one checks the command's wiring.)
func TestEvidenceCLI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "pw")
	if r := run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(dir, "release")); r.code != 0 {
		t.Fatal(r)
	}
	pol := filepath.Join(dir, "verification.yaml")
	os.WriteFile(pol, []byte("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: agents}\nspec:\n  transparencyLog: none\n"+
		"  keys: [{name: release, publicKeyFile: release.pub}]\n  rules: [{name: images, signatures: {keys: [release]}}]\n"), 0o644)
	repo := filepath.Join(dir, "config.git")
	if r := run(t, "", "config", "init", repo, "--pool", "agents", "--policy", pol); r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "evidence", "verify", "--repo", repo, "--pool", "agents"); r.code != 2 || !strings.Contains(r.stderr, "no evidence for pool agents") {
		t.Fatalf("nothing to verify: %+v", r)
	}

	// Evidence as the driver writes it, signed with the release key.
	gen := "g-" + strings.Repeat("ab", 32)
	ro := "ro-test"
	dirEv := path.Join(pool.Dir("agents"), "evidence", gen, ro)
	checks := `[{"check":"allocate","passed":true,"reason":"sandbox sb-1","generation":"` + gen + `","started":"2026-11-29T10:00:00Z","finished":"2026-11-29T10:00:01Z","by":"runtime"}]`
	pred := `{"pool":"agents","generation":"` + gen + `","rollout":"` + ro + `","driver":"ci@host","passed":true,"checks":` + checks + `}`
	st, err := attest.New(path.Join(pool.GenerationsDir("agents"), gen), "sha256:"+strings.TrimPrefix(gen, "g-"), rollout.PredicateEvidence, []byte(pred))
	if err != nil {
		t.Fatal(err)
	}
	stb, _ := attest.Marshal(st)
	sv, err := sign.LoadSignerRef(ctx, filepath.Join(dir, "release.key"), func() ([]byte, error) { return []byte("pw"), nil })
	if err != nil {
		t.Fatal(err)
	}
	env, err := sign.SignEnvelope(ctx, sv, stb)
	if err != nil {
		t.Fatal(err)
	}
	write := func(files map[string]string) {
		g, err := gitops.Open(ctx, repo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Update(ctx, gitops.Request{Branch: "main", Edit: func(tr *gitops.Tree) (*gitops.Commit, error) {
			for p, b := range files {
				if err := tr.WriteFile(p, []byte(b)); err != nil {
					return nil, err
				}
			}
			return &gitops.Commit{Subject: "evidence"}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]string{path.Join(dirEv, rollout.EvidenceEnvelope): string(env), path.Join(dirEv, rollout.EvidenceFile): checks})

	r := run(t, "", "evidence", "verify", "--repo", repo, "--pool", "agents", "--rollout", ro)
	if r.code != 0 || !strings.Contains(r.stdout, gen+" "+ro+": verified") || !strings.Contains(r.stdout, "signature      pass  verified with key release") {
		t.Fatalf("verify: %+v", r)
	}
	r = run(t, "", "evidence", "show", "--repo", repo, "--pool", "agents", "--generation", gen)
	if r.code != 0 || !strings.Contains(r.stdout, "signed (DSSE)") || !strings.Contains(r.stdout, "allocate           pass  2026-11-29T10:00:00Z") || !strings.Contains(r.stdout, "driver    ci@host") {
		t.Fatalf("show: %+v", r)
	}

	write(map[string]string{path.Join(dirEv, rollout.EvidenceFile): strings.Replace(checks, `"passed":true`, `"passed":false`, 1)})
	r = run(t, "", "evidence", "verify", "--repo", repo, "--pool", "agents", "--output", "json")
	var rep rollout.EvidenceReport
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Verified || len(rep.Records) != 1 || !strings.HasPrefix(rep.Records[0].Reason, "checks: evidence.json differs") {
		t.Fatalf("tampered: %+v", r)
	}
}
