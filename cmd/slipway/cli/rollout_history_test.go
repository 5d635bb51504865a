package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"sigs.k8s.io/yaml"
)

// TestRolloutStatusHistoryCLI rolls a pool out for real (a runtime serving
// it, bubblewrap sandboxes), by prefixes of the ids, and reads the rollout
// back: status as a table of the seven steps with a timeline, history as
// one line per rollout, both as JSON and YAML too.
func TestRolloutStatusHistoryCLI(t *testing.T) {
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600)
	p := startRuntime(t, repo, filepath.Join(dir, "state"), tokenFile)

	var list struct {
		Generations []struct {
			ID   string
			Pins []struct{ Kind, Artifact string }
		}
	}
	r := run(t, "", "generation", "list", "--repo", repo, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Generations) != 1 {
		t.Fatalf("generation list: %v %+v", err, r)
	}
	id1 := list.Generations[0].ID
	host := ""
	for _, pin := range list.Generations[0].Pins {
		if pin.Kind == "controlPlane" {
			host, _, _ = strings.Cut(pin.Artifact, "/")
		}
	}
	g1 := filepath.Join(dir, "g1.yaml")
	if r = run(t, "", "generation", "show", id1[:8], "--repo", repo); r.code != 0 {
		t.Fatal(r)
	}
	os.WriteFile(g1, []byte(r.stdout), 0o644)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cp := push(t, host+"/platform/cp:v2", img)
	g2 := filepath.Join(dir, "g2.yaml")
	if r = run(t, "", "generation", "create", "--pool", "agents", "--insecure-skip-verify", "--from", g1, "--pin", "controlPlane="+cp, "--out-file", g2); r.code != 0 {
		t.Fatal(r)
	}
	id2 := strings.TrimSpace(r.stdout)
	if r = run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g2, "--insecure-skip-verify"); r.code != 0 {
		t.Fatal(r)
	}

	base := []string{"--repo", repo, "--pool", "agents"}
	if r = run(t, "", append([]string{"rollout", "history"}, base...)...); r.code != 0 || r.stdout != "no rollouts\n" {
		t.Fatalf("history before any rollout: %+v", r)
	}
	r = run(t, "", append([]string{"rollout", "start", "--to", id2[:10], "--server", p.base, "--token-file", tokenFile, "--unsigned-evidence", "--wait", "--poll", "100ms"}, base...)...)
	if r.code != 0 || !strings.Contains(r.stdout, " succeeded: "+id1+" → "+id2) {
		t.Fatalf("rollout start --to a prefix: %+v", r)
	}
	roID, _, _ := strings.Cut(r.stdout, " ")

	r = run(t, "", append([]string{"rollout", "status"}, base...)...)
	t.Logf("$ slipway rollout status --repo config.git --pool agents\n%s", r.stdout)
	if r.code != 0 {
		t.Fatal(r)
	}
	for _, want := range []string{
		"  rollout   " + roID + " succeeded: " + id1 + " → " + id2 + ", phase retain, started ",
		"STEP             RESULT    STARTED",
		"1 compatibility  passed", "2 warm           passed", "3 prove          passed", "4 route          passed", "5 drain          passed", "6 remove         passed",
		"7 retain         retained", "the control plane speaks control-plane protocol", "evidence in pools/agents/evidence/" + id2 + "/" + roID,
		id1 + " is retained: rollback window until ", "\ntimeline  ", "  1 compatibility│█", "  proof  allocate",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("rollout status does not say %q", want)
		}
	}
	for _, never := range []string{"deadline", "failed (failed)", "running", ": \n"} {
		if strings.Contains(r.stdout, never) {
			t.Errorf("the status of a finished rollout says %q", never)
		}
	}

	r = run(t, "", append([]string{"rollout", "history"}, base...)...)
	t.Logf("$ slipway rollout history --repo config.git --pool agents\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ROLLOUT") || !strings.Contains(r.stdout, shortID(roID)+"  rollout  "+shortID(id1)+"  "+shortID(id2)+"  succeeded  retain ") {
		t.Fatalf("rollout history: %+v", r)
	}
	var hist struct {
		Pool     string
		Rollouts []struct {
			ID, From, To, Outcome string
			Seconds               float64
			Steps                 []struct {
				Number                   int
				Result, Commit, Evidence string
			}
			Commits []string
		}
	}
	r = run(t, "", append([]string{"rollout", "history", "-o", "json"}, base...)...)
	if err := json.Unmarshal([]byte(r.stdout), &hist); err != nil || len(hist.Rollouts) != 1 || hist.Rollouts[0].ID != roID || hist.Rollouts[0].Outcome != "succeeded" ||
		len(hist.Rollouts[0].Steps) != 7 || hist.Rollouts[0].Steps[2].Commit == "" || len(hist.Rollouts[0].Commits) < 7 {
		t.Fatalf("rollout history -o json: %v\n%s", err, r.stdout)
	}
	// By a prefix of the rollout's id; as YAML.
	r = run(t, "", append([]string{"rollout", "status", roID[:9], "-o", "yaml"}, base...)...)
	var st struct {
		Active string
		Steps  []struct{ Phase, Result string }
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st.Active != id2 || len(st.Steps) != 7 || st.Steps[6].Result != "retained" {
		t.Fatalf("rollout status PREFIX -o yaml: %v %+v", err, r)
	}
	if r = run(t, "", append([]string{"rollout", "status", "ro-zzzzzz"}, base...)...); r.code != 2 || !strings.Contains(r.stderr, "no rollout matches ro-zzzzzz in pool agents of ") {
		t.Fatalf("an unknown rollout: %+v", r)
	}
	checkCompletions(t, repo, id1, id2, roID)
	// resume by prefix: the rollout ended, resume says how.
	if r = run(t, "", append([]string{"rollout", "resume", roID[:9], "--server", p.base, "--token-file", tokenFile, "--unsigned-evidence"}, base...)...); r.code != 0 || !strings.HasPrefix(r.stdout, roID+" succeeded") {
		t.Fatalf("resume of a rollout that ended: %+v", r)
	}
}

// checkCompletions asks the shell completion (cobra's __complete, as the
// shells do) for pools, generations and rollouts of the repository.
func checkCompletions(t *testing.T, repo, id1, id2, roID string) {
	t.Helper()
	complete := func(args ...string) []string {
		t.Helper()
		r := run(t, "", append([]string{"__complete"}, args...)...)
		if r.code != 0 {
			t.Fatalf("__complete %v: %+v", args, r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if last := lines[len(lines)-1]; last != ":4" {
			t.Errorf("__complete %v: directive %s, want :4 (no file names)", args, last)
		}
		var vals []string
		for _, l := range lines[:len(lines)-1] {
			v, _, _ := strings.Cut(l, "\t")
			vals = append(vals, v)
		}
		return vals
	}
	if got := complete("rollout", "status", "--repo", repo, "--pool", ""); strings.Join(got, ",") != "agents" {
		t.Errorf("pools: %v", got)
	}
	if got := complete("generation", "show", "--repo", repo, "g-"); len(got) != 2 || got[0] != id2 || got[1] != id1 {
		t.Errorf("generations: %v", got)
	}
	if got := complete("generation", "diff", "--repo", repo, id1, id2[:4]); len(got) != 1 || got[0] != id2 {
		t.Errorf("the second generation of diff: %v", got)
	}
	if got := complete("rollout", "start", "--repo", repo, "--pool", "agents", "--to", id1[:5]); len(got) != 1 || got[0] != id1 {
		t.Errorf("--to: %v", got)
	}
	if got := complete("rollout", "status", "--repo", repo, "--pool", "agents", "ro"); len(got) != 1 || got[0] != roID {
		t.Errorf("rollouts: %v", got)
	}
	// No repository, or one that is not there: no suggestions, no error.
	if got := complete("generation", "show", "g-"); len(got) != 0 {
		t.Errorf("without --repo: %v", got)
	}
	if got := complete("generation", "show", "--repo", repo+"-nowhere", "g-"); len(got) != 0 {
		t.Errorf("a repository that is not there: %v", got)
	}
}
