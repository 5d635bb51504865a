package pipelines

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/testharness/need"
)

// actEvent is one line of act's --json log: a step's output, an annotation,
// a summary, a step's or a job's result.
type actEvent struct {
	Msg        string            `json:"msg"`
	Level      string            `json:"level"`
	JobID      string            `json:"jobID"`
	StepID     []string          `json:"stepID"`
	Command    string            `json:"command"`
	Name       string            `json:"name"`
	Arg        string            `json:"arg"`
	KV         map[string]string `json:"kvPairs"`
	Content    string            `json:"content"`
	StepResult string            `json:"stepResult"`
	JobResult  string            `json:"jobResult"`
	RawOutput  bool              `json:"raw_output"`
}

// actRun is what one act run reported.
type actRun struct {
	log    string
	err    error
	events []actEvent
}

// output is the output name of step (an id in the workflow) in job, as the
// step set it (the composite action's own outputs, not its inner steps').
func (r *actRun) output(job, step, name string) string {
	v := ""
	for _, e := range r.events {
		if e.Command == "set-output" && e.JobID == job && len(e.StepID) == 1 && e.StepID[0] == step && e.Name == name {
			v = e.Arg
		}
	}
	return v
}

func (r *actRun) jobResult(job string) string {
	for _, e := range r.events {
		if e.JobID == job && e.JobResult != "" {
			return e.JobResult
		}
	}
	return ""
}

// errors are the ::error annotations of job.
func (r *actRun) errors(job string) []actEvent {
	var es []actEvent
	for _, e := range r.events {
		if e.Command == "error" && e.JobID == job {
			es = append(es, e)
		}
	}
	return es
}

// summary is job's step summary (the composite actions' own, once each).
func (r *actRun) summary(job string) string {
	var b strings.Builder
	for _, e := range r.events {
		if e.Command == "summary" && e.JobID == job && len(e.StepID) == 1 {
			b.WriteString(e.Content)
		}
	}
	return b.String()
}

// releaseShape is a version pipelines/github/setup/install.sh installs.
var releaseShape = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// releaseArtifact returns slipway and its version when it reports a release
// version, or else a build of ../cmd/slipway at v0.0.0-act.
func releaseArtifact(t *testing.T, slipway string) (string, string) {
	t.Helper()
	out, err := exec.Command(slipway, "version").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) > 1 && releaseShape.MatchString(f[1]) {
		return f[1], slipway
	}
	const version = "v0.0.0-act"
	artifact := filepath.Join(t.TempDir(), "slipway-linux-amd64")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/slipway-dev/slipway/internal/version.version="+version, "-o", artifact, "../cmd/slipway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway: %v\n%s", err, out)
	}
	return version, artifact
}

// TestActReleaseE2E runs examples/github/local-release.yml with nektos/act on
// the host (-P ubuntu-latest=-self-hosted) against a releaseChain: the setup
// action installs slipway from a file:// artifact checked against its
// sha256; the template job builds agent-tools, pushes it by digest to
// docker-registry, signs and attests it and verifies it; the promote job
// pins the template's ref into the next generation, promotes it into the
// config repository and rolls it out on the running runtime. Outputs cross
// steps and jobs (ref, digest, generation, commit, status), and each step's
// summary and the config repository say the same. Then bad input: a runner
// image by tag fails generation-create with the CLI's message as an
// annotation and exit 2, and nothing is promoted; a template signed by a key
// the policy does not name fails verify (exit 1) and the promote job never
// runs.
func TestActReleaseE2E(t *testing.T) {
	need.Short(t, "act running the release workflow end to end")
	act := need.Env(t, "ACT", "`make bin/act` builds nektos/act (pinned in tools/go.mod) and make test sets it")
	if _, err := os.Stat(act); err != nil {
		need.Missing(t, "ACT=%s: %v: run `make bin/act`", act, err)
	}
	c := newReleaseChain(t, chainSkips(t))

	// The release artifact the setup action installs: slipway at a release
	// version (the installer checks the binary reports it). make build's
	// binary has one (v0.0.0-<commit> when untagged); another is rebuilt
	// with one.
	version, artifact := releaseArtifact(t, c.slipway)
	body, err := os.ReadFile(artifact)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])

	wf, err := os.ReadFile("../examples/github/local-release.yml")
	if err != nil {
		t.Fatal(err)
	}
	c.write(t, ".github/workflows/local-release.yml", string(wf))
	if err := os.CopyFS(filepath.Join(c.project, "pipelines", "github"), os.DirFS("github")); err != nil {
		t.Fatal(err)
	}
	c.git(t, "add", "-A")
	c.git(t, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "workflow")
	key, err := os.ReadFile(c.keyFile)
	if err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	run := func(key []byte, runner string, args ...string) *actRun {
		t.Helper()
		inputs := map[string]string{
			"slipway-version": version, "slipway-url": "file://" + artifact, "slipway-sha256": sha,
			"registry": c.host, "config-repo": c.configRepo, "previous": c.g1File, "runner-image": runner,
			"runtime-url": c.server, "token-file": c.tokenFile,
		}
		argv := []string{"workflow_dispatch", "-W", ".github/workflows/local-release.yml", "-P", "ubuntu-latest=-self-hosted",
			"--json", "-s", "SLIPWAY_SIGNING_KEY", "-s", "SLIPWAY_KEY_PASSWORD"}
		for k, v := range inputs {
			argv = append(argv, "--input", k+"="+v)
		}
		cmd := exec.Command(act, append(argv, args...)...)
		cmd.Dir = c.project
		// The steps inherit act's environment on the host: no password, and
		// no slipway on PATH but the one the setup action installs.
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "COSIGN_PASSWORD=") && !strings.HasPrefix(e, "HOME=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, "HOME="+home, "SLIPWAY_SIGNING_KEY="+string(key), "SLIPWAY_KEY_PASSWORD="+c.password)
		out, err := cmd.CombinedOutput()
		r := &actRun{log: string(out), err: err}
		sc := bufio.NewScanner(strings.NewReader(r.log))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e actEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				r.events = append(r.events, e)
			}
		}
		if strings.Contains(r.log, c.password) {
			t.Errorf("the key's password is in act's log")
		}
		return r
	}
	fail := func(r *actRun, format string, args ...any) {
		t.Helper()
		var b strings.Builder
		for _, e := range r.events {
			b.WriteString(strings.TrimRight(e.Msg, "\n") + "\n")
		}
		t.Fatalf(format+"\n%s", append(args, b.String())...)
	}

	before := c.head(t)
	r := run(key, c.runner)
	if r.err != nil || r.jobResult("template") != "success" || r.jobResult("promote") != "success" {
		fail(r, "act: %v", r.err)
	}
	if got := r.output("template", "setup", "sha256"); got != sha {
		t.Errorf("setup installed sha256 %q, want %q", got, sha)
	}
	digest, ref := r.output("template", "build", "digest"), r.output("template", "build", "ref")
	if !strings.HasPrefix(digest, "sha256:") || ref != c.host+"/templates/agent-tools@"+digest || r.output("template", "build", "template-id") != digest {
		t.Errorf("template-build outputs digest %q ref %q", digest, ref)
	}
	if r.output("template", "verify", "verified") != "true" || r.output("template", "verify", "digest") != digest {
		t.Errorf("verify outputs verified %q digest %q", r.output("template", "verify", "verified"), r.output("template", "verify", "digest"))
	}
	gen := r.output("promote", "generation", "generation")
	commit := r.output("promote", "promote", "commit")
	if !strings.HasPrefix(gen, "g-") || gen == c.g1 || r.output("promote", "promote", "generation") != gen {
		t.Errorf("generation %q, promoted %q (g1 %s)", gen, r.output("promote", "promote", "generation"), c.g1)
	}
	// The promotion is the commit after the one before the run (the
	// rollout's steps commit after it).
	if parent, err := exec.Command("git", "-C", c.configRepo, "rev-parse", commit+"^").Output(); err != nil || strings.TrimSpace(string(parent)) != before {
		t.Errorf("promote's commit %q: parent %q (%v), want %s", commit, parent, err, before)
	}
	if err := exec.Command("git", "-C", c.configRepo, "merge-base", "--is-ancestor", commit, "main").Run(); err != nil {
		t.Errorf("promote's commit %q is not on main: %v", commit, err)
	}
	if r.output("promote", "rollout", "status") != "succeeded" || r.output("promote", "rollout", "generation") != gen {
		t.Errorf("rollout status %q generation %q", r.output("promote", "rollout", "status"), r.output("promote", "rollout", "generation"))
	}
	if want := "released digest=" + digest + " generation=" + gen + " commit=" + commit + " rollout=succeeded"; !strings.Contains(r.log, want) {
		t.Errorf("the last step did not print %q", want)
	}
	for job, wants := range map[string][]string{
		"template": {"### slipway template build agent-tools", "| ref | " + ref + " |", "### slipway verify", "| verified | true |"},
		"promote":  {"### slipway generation create", "| generation | " + gen + " |", "### slipway promote", "| commit | " + commit + " |", "### slipway rollout", "| status | succeeded |"},
	} {
		s := r.summary(job)
		for _, w := range wants {
			if !strings.Contains(s, w) {
				t.Errorf("%s job's summary lacks %q:\n%s", job, w, s)
			}
		}
	}
	if es := append(r.errors("template"), r.errors("promote")...); len(es) > 0 {
		t.Errorf("annotations on a clean run: %+v", es)
	}
	status := c.run(t, c.project, "rollout", "status", "--repo", c.configRepo, "--pool", "agents", "--output", "json")
	if !strings.Contains(status, `"active": "`+gen+`"`) && !strings.Contains(status, gen) {
		t.Errorf("rollout status after the run:\n%s", status)
	}
	if t.Failed() {
		fail(r, "outputs above")
	}

	// A runner image by tag where a digest is required.
	before = c.head(t)
	tag := c.host + "/platform/runner:v1"
	r = run(key, tag)
	if r.err == nil || r.jobResult("template") != "success" || r.jobResult("promote") != "failure" {
		fail(r, "a runner by tag: act %v", r.err)
	}
	es := r.errors("promote")
	if len(es) == 0 || !strings.Contains(es[0].Arg, tag) || !strings.Contains(r.log, `"msg":"exit status 2"`) {
		fail(r, "a runner by tag: annotations %+v, want the CLI's message naming %s and exit 2", es, tag)
	}
	if r.output("promote", "generation", "generation") != "" || r.output("promote", "promote", "commit") != "" || c.head(t) != before {
		fail(r, "a refused generation was promoted")
	}

	// A template signed by a key the policy does not name (a changed
	// template: the digest built above already has the release key's
	// signature in the registry).
	c.write(t, "templates/agent-tools/cache-seed/changed", "changed\n")
	c.git(t, "add", "-A")
	c.git(t, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "changed template")
	other := filepath.Join(t.TempDir(), "other")
	c.run(t, c.project, "keys", "generate", "--output-key-prefix", other)
	otherKey, err := os.ReadFile(other + ".key")
	if err != nil {
		t.Fatal(err)
	}
	r = run(otherKey, c.runner)
	if r.err == nil || r.jobResult("template") != "failure" || r.jobResult("promote") != "" {
		fail(r, "a template signed by another key: act %v, promote job %q", r.err, r.jobResult("promote"))
	}
	es = r.errors("template")
	if len(es) == 0 || !strings.Contains(es[0].Arg, "no signature of "+c.host+"/templates/agent-tools@sha256:") || !strings.Contains(es[0].Arg, "by key release") || r.output("template", "verify", "verified") != "false" || !strings.Contains(r.log, `"msg":"exit status 1"`) {
		fail(r, "a refused verification: annotations %+v, verified %q", es, r.output("template", "verify", "verified"))
	}
	if c.head(t) != before {
		t.Fatal("the config repository changed after a refused verification")
	}
}
