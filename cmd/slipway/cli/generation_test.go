package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/gittest"
)

func TestGenerationPromoteCLI(t *testing.T) {
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "platform/runner:v2", "templates/tools:v1", "platform/runner:evil")
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "pw")
	key := filepath.Join(dir, "keys", "release.key")
	if r := run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(dir, "keys", "release")); r.code != 0 {
		t.Fatal(r)
	}
	img := func(rt string) string {
		repo, _, _ := strings.Cut(rt, ":")
		return host + "/" + repo + "@" + digests[rt]
	}
	for _, rt := range []string{"platform/cp:v1", "platform/runner:v1", "platform/runner:v2", "templates/tools:v1"} {
		if r := run(t, "", "sign", img(rt), "--key", key, "--offline-no-tlog"); r.code != 0 {
			t.Fatal(r)
		}
	}
	pol := filepath.Join(dir, "keys", "verification.yaml")
	os.WriteFile(pol, []byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: agents}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules: [{name: images, signatures: {keys: [release]}}]
`), 0o644)

	// A config repository seeded with the policy and its key.
	repo := filepath.Join(dir, "config.git")
	if r := run(t, "", "config", "init", repo, "--pool", "agents", "--policy", pol); r.code != 0 || !strings.HasPrefix(r.stdout, "committed ") {
		t.Fatalf("config init: %+v", r)
	}
	if r := run(t, "", "config", "init", repo, "--pool", "agents", "--policy", pol); r.code != 0 || !strings.HasPrefix(r.stdout, "unchanged ") {
		t.Fatalf("config init again: %+v", r)
	}
	out, err := exec.Command("git", "-C", repo, "show", "main:policies/release.pub").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PUBLIC KEY") {
		t.Fatalf("key not in the repository: %v %s", err, out)
	}

	g1 := filepath.Join(dir, "g1.yaml")
	r := run(t, "", "generation", "create", "--pool", "agents", "--policy", pol, "--output", g1,
		"--pin", "controlPlane="+img("platform/cp:v1"), "--pin", "runner="+img("platform/runner:v1"),
		"--pin", "workspaceTemplate="+img("templates/tools:v1"), "--pin", "secretVersion=vault://kv/agents/token#7",
		"--control-plane-protocol", "1-2", "--runner-protocol", "1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "g-") {
		t.Fatalf("generation create: %+v", r)
	}
	id1 := strings.TrimSpace(r.stdout)

	// Refusals: a tag (2), an unsigned image (1, naming pin and check).
	r = run(t, "", "generation", "create", "--pool", "agents", "--policy", pol, "--output", filepath.Join(dir, "x.yaml"), "--from", g1, "--pin", "runner="+host+"/platform/runner:v2")
	if r.code != 2 || !strings.Contains(r.stderr, "is a tag") {
		t.Fatalf("tag pin: %+v", r)
	}
	r = run(t, "", "generation", "create", "--pool", "agents", "--policy", pol, "--output", filepath.Join(dir, "x.yaml"), "--from", g1, "--pin", "runner="+img("platform/runner:evil"))
	if r.code != 1 || !strings.Contains(r.stderr, "runner "+host+"/platform/runner") || !strings.Contains(r.stderr, "images/signature") {
		t.Fatalf("unsigned pin: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.yaml")); err == nil {
		t.Fatal("a refused generation was written")
	}

	r = run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g1, "--activate")
	if r.code != 0 || !strings.Contains(r.stdout, id1) {
		t.Fatalf("promote g1: %+v", r)
	}
	g2 := filepath.Join(dir, "g2.yaml")
	// The generation's id as a GitLab dotenv report.
	dotenv := filepath.Join(dir, "slipway.env")
	r = run(t, "", "generation", "create", "--pool", "agents", "--policy", pol, "--output", g2, "--from", g1, "--pin", "runner="+img("platform/runner:v2"), "--ci", "gitlab", "--gitlab-dotenv", dotenv)
	if r.code != 0 {
		t.Fatal(r)
	}
	id2 := strings.TrimSpace(r.stdout)
	if got, want := read(t, dotenv), "GENERATION="+id2+"\nSEQUENCE=2\nFILE="+g2+"\n"; got != want {
		t.Fatalf("dotenv %q, want %q", got, want)
	}
	// The repository's policy is used: no --policy needed. The commit as a
	// Tekton result.
	results := t.TempDir()
	if r = run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g2, "-o", "json", "--ci", "tekton", "--tekton-results", results); r.code != 0 {
		t.Fatalf("promote g2: %+v", r)
	}
	var pj struct{ Status, Commit, Generation, Previous, PolicyFrom string }
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil || pj.Status != "committed" || pj.Previous != id1 || pj.PolicyFrom != "policies/verification.yaml" {
		t.Fatalf("promote JSON %+v %v\n%s", pj, err, r.stdout)
	}
	if c, g := read(t, filepath.Join(results, "COMMIT")), read(t, filepath.Join(results, "GENERATION")); c != pj.Commit || g != id2 {
		t.Fatalf("Tekton results COMMIT=%q GENERATION=%q, want %q %q", c, g, pj.Commit, id2)
	}

	// A refused verification under GitHub: verified=false, the failed check as an annotation, exit 1.
	ghOut := filepath.Join(dir, "github_output")
	t.Setenv("GITHUB_OUTPUT", ghOut)
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	r = run(t, "", "verify", img("platform/runner:evil"), "--policy", pol, "--ci", "github")
	if r.code != 1 || !strings.Contains(r.stdout, "::error title=verification refused%3A ") || !strings.Contains(read(t, ghOut), "verified=false\n") {
		t.Fatalf("verify --ci github: %+v\n%s", r, read(t, ghOut))
	}
	r = run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g1)
	if r.code != 1 || !strings.Contains(r.stderr, "--rollback") {
		t.Fatalf("older generation: %+v", r)
	}

	// show and diff by id, read from the repository.
	r = run(t, "", "generation", "show", id1, "--repo", repo, "--pool", "agents")
	if r.code != 0 || !strings.Contains(r.stdout, "id: "+id1) {
		t.Fatalf("show: %+v", r)
	}
	r = run(t, "", "generation", "diff", id1, id2, "--repo", repo, "--pool", "agents")
	if r.code != 0 || !strings.Contains(r.stdout, "runner: "+host+"/platform/runner@") || strings.Contains(r.stdout, "controlPlane") {
		t.Fatalf("diff: %+v", r)
	}
	checkGenerationPrefixes(t, repo, id1, id2)
	if out, err := exec.Command("git", "-C", repo, "fsck", "--strict").CombinedOutput(); err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
}

// checkGenerationPrefixes: ids by unique prefix in show, diff and list;
// unknown, short and ambiguous prefixes are usage errors that say why.
func checkGenerationPrefixes(t *testing.T, repo, id1, id2 string) {
	t.Helper()
	r := run(t, "", "generation", "show", id1[:8], "--repo", repo)
	if r.code != 0 || !strings.Contains(r.stdout, "id: "+id1) {
		t.Fatalf("show by prefix without --pool: %+v", r)
	}
	r = run(t, "", "generation", "diff", id1[:9], id2[:9], "--repo", repo, "--pool", "agents")
	if r.code != 0 || !strings.Contains(r.stdout, id1+" (sequence 1) -> "+id2) {
		t.Fatalf("diff by prefix: %+v", r)
	}
	r = run(t, "", "generation", "show", "g-000000", "--repo", repo, "--pool", "agents")
	if r.code != 2 || !strings.Contains(r.stderr, "no generation matches g-000000 in pool agents of "+repo) {
		t.Fatalf("unknown prefix: %+v", r)
	}
	r = run(t, "", "generation", "show", id1[:5], "--repo", repo)
	if r.code != 2 || !strings.Contains(r.stderr, "at least 6 characters after g-") {
		t.Fatalf("short prefix: %+v", r)
	}
	r = run(t, "", "generation", "list", "--repo", repo)
	if r.code != 0 || !strings.Contains(r.stdout, "ID") || !strings.Contains(r.stdout, shortID(id1)+"  agents  1    active") || !strings.Contains(r.stdout, shortID(id2)+"  agents  2    target") {
		t.Fatalf("list: %+v", r)
	}
	if !strings.Contains(r.stdout, "runner sha256:") || !strings.Contains(r.stdout, "secretVersion vault://kv/agents/token#7") || strings.Index(r.stdout, shortID(id2)) > strings.Index(r.stdout, shortID(id1)) {
		t.Fatalf("list: pins, or not newest first:\n%s", r.stdout)
	}
	r = run(t, "", "generation", "list", "--repo", repo, "--pool", "agents", "-o", "json")
	var l struct {
		Generations []struct {
			ID, State string
			Sequence  int
			Pins      []struct{ Kind, Identity string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Generations) != 2 || l.Generations[0].ID != id2 || l.Generations[1].State != "active" || len(l.Generations[0].Pins) != 4 {
		t.Fatalf("list -o json: %v %+v\n%s", err, l, r.stdout)
	}
	// Another generation whose id starts as id1's does: the prefix they
	// share is ambiguous, and the error lists both.
	twin := id1[:12] + strings.Repeat("0", len(id1)-12)
	clone := t.TempDir()
	gittest.Git(t, "", "clone", "-q", repo, clone)
	b, err := os.ReadFile(filepath.Join(clone, "pools/agents/generations", id1+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(clone, "pools/agents/generations", twin+".yaml"), b, 0o644)
	gittest.Git(t, clone, "add", "-A")
	gittest.Git(t, clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a twin")
	gittest.Git(t, clone, "push", "-q", "origin", "HEAD:main")
	r = run(t, "", "generation", "show", id1[:12], "--repo", repo)
	if r.code != 2 || !strings.Contains(r.stderr, "generation "+id1[:12]+" is ambiguous: it matches ") || !strings.Contains(r.stderr, id1) || !strings.Contains(r.stderr, twin) {
		t.Fatalf("ambiguous prefix: %+v", r)
	}
}
