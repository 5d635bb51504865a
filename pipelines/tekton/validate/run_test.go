package validate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
)

// slipwayBin returns $SLIPWAY_BIN (the Makefile's bin/slipway) or builds the
// root module's cmd/slipway into a temp dir.
func slipwayBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("SLIPWAY_BIN"); b != "" {
		if _, err := os.Stat(b); err == nil {
			return b
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/slipway", "./cmd/slipway")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway: %v\n%s", err, out)
	}
	return dir + "/slipway"
}

// runnerBin is slipway-runner beside slipway (the Makefile's bin/), or
// cmd/slipway-runner built into a temp dir.
func runnerBin(t *testing.T, slipway string) string {
	t.Helper()
	if b := filepath.Join(filepath.Dir(slipway), "slipway-runner"); fileExists(b) {
		return b
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/slipway-runner", "./cmd/slipway-runner")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/slipway-runner: %v\n%s", err, out)
	}
	return dir + "/slipway-runner"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startRegistry starts Debian's docker-registry on a free loopback port.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		missing(t, "docker-registry not installed (apt-get install docker-registry; make deps)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\nstorage: {filesystem: {rootdirectory: %q}}\nhttp: {addr: %q}\n", dir+"/storage", addr)
	if err := os.WriteFile(dir+"/config.yml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", dir+"/config.yml")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get("http://" + addr + "/v2/"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return addr
			}
		}
	}
	t.Fatalf("docker-registry on %s not ready", addr)
	return ""
}

type harness struct {
	t       *testing.T
	ctx     context.Context
	tasks   map[string]*v1.Task
	source  string
	bin     string
	secrets map[string]map[string]string
	path    string // the steps' PATH; default slipway's folder, /usr/bin, /bin
}

func newHarness(t *testing.T) *harness {
	ctx, err := Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := loadAll(t)
	bin := slipwayBin(t)
	return &harness{t: t, ctx: ctx, tasks: tasks, source: t.TempDir(), bin: bin, secrets: map[string]map[string]string{}}
}

// sh runs slipway on the host to prepare what the Tasks work on.
func (h *harness) slipway(args ...string) string {
	h.t.Helper()
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.source
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=tekton-pw-1")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		h.t.Fatalf("slipway %s: %v\n%s%s", strings.Join(args, " "), err, out, ee.Stderr)
	}
	return string(out)
}

// run substitutes the Task with params by Tekton's code and runs its steps.
func (h *harness) run(task string, params map[string]any) (map[string]string, string, error) {
	h.t.Helper()
	var ps v1.Params
	for k, v := range params {
		switch v := v.(type) {
		case string:
			ps = append(ps, v1.Param{Name: k, Value: *v1.NewStructuredValues(v)})
		case []string:
			ps = append(ps, v1.Param{Name: k, Value: v1.ParamValue{Type: v1.ParamTypeArray, ArrayVal: v}})
		}
	}
	spec, err := Substitute(h.ctx, h.tasks[task], ps)
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Dir(h.bin) + ":/usr/bin:/bin"
	if h.path != "" {
		path = h.path
	}
	host := &Host{
		Results:    h.t.TempDir(),
		Workspaces: map[string]string{"source": h.source},
		Secrets:    h.secrets,
		Env:        []string{"PATH=" + path, "HOME=" + h.t.TempDir()},
	}
	return Run(h.ctx, spec, host)
}

func TestLintTaskRuns(t *testing.T) {
	h := newHarness(t)
	os.MkdirAll(filepath.Join(h.source, "deploy"), 0o755)
	os.WriteFile(filepath.Join(h.source, "deploy", "pod.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      image: nginx:1.25\n"), 0o644)
	os.MkdirAll(filepath.Join(h.source, "clean"), 0o755)
	os.WriteFile(filepath.Join(h.source, "clean", "pod.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      image: nginx:1.25@sha256:"+strings.Repeat("a", 64)+"\n"), 0o644)

	res, log, err := h.run("slipway-lint", map[string]any{"paths": []string{"deploy", "clean"}})
	var se *StepError
	if !errors.As(err, &se) || se.Code != 1 {
		t.Fatalf("lint with a finding: %v, want exit 1\n%s", err, log)
	}
	if res["FINDINGS"] != "1" || !strings.Contains(log, "deploy/pod.yaml:7:") {
		t.Errorf("results %v, log:\n%s", res, log)
	}
	res, log, err = h.run("slipway-lint", map[string]any{"paths": []string{"clean"}})
	if err != nil || res["FINDINGS"] != "0" {
		t.Fatalf("clean lint: %v %v\n%s", err, res, log)
	}
}

func TestVerifyGenerationPromoteTasksRun(t *testing.T) {
	h := newHarness(t)
	host := startRegistry(t)
	rootfs := t.TempDir()
	os.WriteFile(filepath.Join(rootfs, "hello"), []byte("tekton\n"), 0o644)
	push := func(repo string) string {
		out := h.slipway("image", "from-dir", rootfs, "--push", host+"/"+repo, "-o", "json")
		i := strings.Index(out, "sha256:")
		if i < 0 {
			t.Fatalf("no digest in %s", out)
		}
		return host + "/" + repo + "@" + out[i:i+71]
	}
	signed := push("tekton/signed")
	// generation create checks that a runner pin is a runner image and a
	// template pin a template image (their config labels): the runner from
	// slipway image runner, the template from-dir with the label template
	// build sets.
	runnerOut := h.slipway("image", "runner", runnerBin(t, h.bin), "--push", host+"/tekton/runner", "-o", "json")
	i := strings.Index(runnerOut, "sha256:")
	if i < 0 {
		t.Fatalf("no digest in %s", runnerOut)
	}
	runner := host + "/tekton/runner@" + runnerOut[i:i+71]
	tmplOut := h.slipway("image", "from-dir", rootfs, "--push", host+"/tekton/template", "-o", "json",
		"--label", "dev.slipway.template.spec-digest=sha256:"+strings.Repeat("0", 64))
	i = strings.Index(tmplOut, "sha256:")
	if i < 0 {
		t.Fatalf("no digest in %s", tmplOut)
	}
	tmpl := host + "/tekton/template@" + tmplOut[i:i+71]
	os.WriteFile(filepath.Join(rootfs, "other"), []byte("x"), 0o644)
	unsigned := push("tekton/unsigned")
	h.slipway("keys", "generate", "--output-key-prefix", filepath.Join(h.source, "ci"))
	for _, ref := range []string{signed, runner, tmpl} {
		h.slipway("sign", ref, "--key", filepath.Join(h.source, "ci.key"), "--offline-no-tlog")
	}
	os.WriteFile(filepath.Join(h.source, "policy.yaml"), []byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: tekton}
spec:
  transparencyLog: none
  keys: [{name: ci, publicKeyFile: ci.pub}]
  rules:
    - name: images
      signatures: {keys: [ci]}
`), 0o644)

	res, log, err := h.run("slipway-verify", map[string]any{"ref": signed, "policy": "policy.yaml", "kind": "runner"})
	if err != nil {
		t.Fatalf("verify signed: %v\n%s", err, log)
	}
	if res["VERIFIED"] != "true" || res["DIGEST"] != signed[strings.Index(signed, "@")+1:] {
		t.Errorf("results %v", res)
	}
	res, log, err = h.run("slipway-verify", map[string]any{"ref": unsigned, "policy": "policy.yaml", "kind": "runner"})
	var se *StepError
	if !errors.As(err, &se) || se.Code != 1 || res["VERIFIED"] != "false" || !strings.Contains(log, "no signature") {
		t.Fatalf("verify unsigned: %v %v\n%s", err, res, log)
	}
	// A tag where a digest is required: refused by the CLI, exit code 2 or 1, never verified.
	res, log, err = h.run("slipway-verify", map[string]any{"ref": host + "/tekton/signed:latest", "policy": "policy.yaml", "kind": "runner"})
	if err == nil || res["VERIFIED"] == "true" {
		t.Fatalf("verify a tag: %v %v\n%s", err, res, log)
	}

	// The release chain as the Pipeline wires it: verify's REF becomes a pin
	// of generation-create, whose FILE is promote's generation param.
	verified, _, err := h.run("slipway-verify", map[string]any{"ref": runner, "policy": "policy.yaml", "kind": "runner"})
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "config.git")
	h.slipway("config", "init", repo, "--pool", "agents", "--policy", filepath.Join(h.source, "policy.yaml"))
	gen, log, err := h.run("slipway-generation-create", map[string]any{"pool": "agents", "pins": []string{"runner=" + verified["REF"], "controlPlane=" + signed, "workspaceTemplate=" + tmpl, "secretVersion=vault://kv/agents/token#1"}, "policy": "policy.yaml", "control-plane-protocol": "1-2", "runner-protocol": "1"})
	if err != nil || !strings.HasPrefix(gen["GENERATION"], "g-") || gen["SEQUENCE"] != "1" || gen["FILE"] != "generation.yaml" {
		t.Fatalf("generation-create: %v %v\n%s", err, gen, log)
	}
	// An unsigned pin is refused and nothing is written.
	os.Remove(filepath.Join(h.source, "generation.yaml"))
	if res, log, err := h.run("slipway-generation-create", map[string]any{"pool": "agents", "pins": []string{"runner=" + unsigned}, "policy": "policy.yaml", "output": "refused.yaml"}); err == nil || res["GENERATION"] != "" {
		t.Fatalf("generation-create of an unsigned pin: %v %v\n%s", err, res, log)
	}
	if _, err := os.Stat(filepath.Join(h.source, "refused.yaml")); err == nil {
		t.Fatal("a refused generation was written")
	}
	gen, _, err = h.run("slipway-generation-create", map[string]any{"pool": "agents", "pins": []string{"runner=" + verified["REF"], "controlPlane=" + signed, "workspaceTemplate=" + tmpl, "secretVersion=vault://kv/agents/token#1"}, "policy": "policy.yaml", "control-plane-protocol": "1-2", "runner-protocol": "1"})
	if err != nil {
		t.Fatal(err)
	}
	prom, log, err := h.run("slipway-promote", map[string]any{"repo": repo, "pool": "agents", "generation": gen["FILE"]})
	if err != nil || prom["GENERATION"] != gen["GENERATION"] || len(prom["COMMIT"]) != 40 {
		t.Fatalf("promote: %v %v\n%s", err, prom, log)
	}
	out, err := exec.Command("git", "-C", repo, "rev-parse", "main").Output()
	if err != nil || strings.TrimSpace(string(out)) != prom["COMMIT"] {
		t.Fatalf("config repo main is %s, promote said %s (%v)", out, prom["COMMIT"], err)
	}
}

// The template-build Task's script, after Tekton's substitution, is the one
// slipway call with the params, the results directory and the key's
// workspace path; the password reaches it only through the Secret.
func TestTemplateBuildSubstitution(t *testing.T) {
	ctx, err := Context(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := loadAll(t)
	spec, err := Substitute(ctx, tasks["slipway-template-build"], v1.Params{
		{Name: "spec", Value: *v1.NewStructuredValues("templates/minimal/template.yaml")},
		{Name: "push", Value: *v1.NewStructuredValues("registry.example/templates/minimal")},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := spec.Steps[len(spec.Steps)-1] // after install, the slipway call
	for _, want := range []string{
		`--tekton-results "$(dirname "/tekton/results/IMAGE_DIGEST")"`,
		`"templates/minimal/template.yaml" --push "registry.example/templates/minimal"`,
		`--sign-key "/workspace/signing/cosign.key"`,
	} {
		if !strings.Contains(s.Script, want) {
			t.Errorf("script lacks %s:\n%s", want, s.Script)
		}
	}
	if s.Image != "ghcr.io/slipway-dev/slipway-step@sha256:"+strings.Repeat("0", 64) || s.WorkingDir != "/workspace/source" {
		t.Errorf("image %s, workingDir %s", s.Image, s.WorkingDir)
	}
	if s.Env[0].ValueFrom.SecretKeyRef.Name != "slipway-signing" || s.Env[1].Value != "https://tekton.dev/chains/v2" {
		t.Errorf("env %+v", s.Env)
	}
	// A required param left out is left as a variable: refused.
	if _, err := Substitute(ctx, tasks["slipway-template-build"], nil); err == nil || !strings.Contains(err.Error(), "params.spec") {
		t.Errorf("no params: %v", err)
	}
}

// missing skips t with the reason, or fails it when CI=true: CI (.ci/run)
// installs what these tests need, so a skip there would hide a test that
// never ran. It is the root module's testharness/need.Missing, which
// this module (Tekton's dependencies only) does not import.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and this test's needs are not met: "+format, args...)
	}
	t.Skipf(format, args...)
}

// TestInstallStepByChecksum: with release-url, a Task's install step
// downloads slipway-linux-<arch> and checksums.txt from a release served on
// 127.0.0.1, checks the sha256, and the Task's slipway call runs that
// binary (no slipway is on the steps' PATH); a checksum that does not
// match installs nothing and the slipway step never runs.
func TestInstallStepByChecksum(t *testing.T) {
	h := newHarness(t)
	h.path = "/usr/bin:/bin"
	os.MkdirAll(filepath.Join(h.source, "deploy"), 0o755)
	os.WriteFile(filepath.Join(h.source, "deploy", "pod.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      image: nginx:1.25\n"), 0o644)
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64"}[runtime.GOARCH]
	rel := t.TempDir()
	bin, err := os.ReadFile(h.bin)
	if err != nil {
		t.Fatal(err)
	}
	file := "slipway-linux-" + arch
	if err := os.WriteFile(filepath.Join(rel, file), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	sums := hex.EncodeToString(sum[:]) + "  " + file + "\n"
	os.WriteFile(filepath.Join(rel, "checksums.txt"), []byte(sums), 0o644)
	srv := httptest.NewServer(http.FileServer(http.Dir(rel)))
	defer srv.Close()

	res, log, err := h.run("slipway-lint", map[string]any{"paths": []string{"deploy"}, "release-url": srv.URL + "/"})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "lint" || se.Code != 1 || res["FINDINGS"] != "1" {
		t.Fatalf("lint with the installed slipway: %v, results %v\n%s", err, res, log)
	}
	if !strings.Contains(log, "installed "+file+" sha256:"+hex.EncodeToString(sum[:])) {
		t.Errorf("install step log:\n%s", log)
	}

	// checksums.txt names another sha256: refused, nothing installed, no lint.
	os.WriteFile(filepath.Join(rel, "checksums.txt"), []byte(strings.Repeat("0", 64)+"  "+file+"\n"), 0o644)
	res, log, err = h.run("slipway-lint", map[string]any{"paths": []string{"deploy"}, "release-url": srv.URL})
	if !errors.As(err, &se) || se.Step != "install" || !strings.Contains(log, "not installed") || len(res) != 0 {
		t.Fatalf("a checksum mismatch: %v, results %v\n%s", err, res, log)
	}
	// Without release-url and without a slipway on PATH, the Task fails:
	// the slipway that ran above was the installed one.
	if _, log, err = h.run("slipway-lint", map[string]any{"paths": []string{"deploy"}}); !errors.As(err, &se) || se.Step != "lint" || se.Code != 127 {
		t.Fatalf("no release-url and no slipway on PATH: %v\n%s", err, log)
	}
}
