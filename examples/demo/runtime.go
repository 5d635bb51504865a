package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runtimeProc is `slipway runtime serve` on the demo's config repository.
type runtimeProc struct {
	server, token string
	stop          func()
}

// startRuntime starts the runtime and waits for its first warm sandbox.
func startRuntime(sh shell, work string) (*runtimeProc, error) {
	section("runtime serve", "follows config.git, verifies g1 against its policy, keeps warm sandboxes (bubblewrap, no network), signs its runs' checkpoints")
	return serveRuntime(sh, work, "warm pools: ", "--checkpoint-key", filepath.Join("policies", "release.key"))
}

// serveRuntime starts `slipway runtime serve` with the extra arguments and
// waits until it serves and logs a line starting with ready.
func serveRuntime(sh shell, work, ready string, extra ...string) (*runtimeProc, error) {
	// The template runs as uid 1000: the path to the runtime's state must be
	// traversable by it (the demo's folder is made 0700).
	if err := os.Chmod(work, 0o711); err != nil {
		return nil, err
	}
	token := filepath.Join(work, "runtime.token")
	if err := os.WriteFile(token, []byte("demo-runtime-token-0123456789\n"), 0o600); err != nil {
		return nil, err
	}
	args := []string{"runtime", "serve", "--repo", "config.git", "--state", "state", "--listen", "127.0.0.1:0", "--token-file", token, "--sync-interval", "500ms"}
	args = append(args, extra...)
	fmt.Printf("$ slipway %s &\n", strings.Join(args, " "))
	srv := exec.Command(planeBin(sh, "SLIPWAY_RUNTIME_BIN"), args...)
	srv.Dir = sh.dir
	stderr, err := srv.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- srv.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
		}
	}
	addr := make(chan string, 1)
	warm := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Printf("  | runtime: %s\n", line)
			if a, ok := strings.CutPrefix(line, "serving on "); ok {
				addr <- a
			}
			if strings.HasPrefix(logMsg(line), ready) {
				select {
				case warm <- struct{}{}:
				default:
				}
			}
		}
	}()
	p := &runtimeProc{token: token, stop: stop}
	select {
	case a := <-addr:
		p.server = "http://" + a
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("runtime serve did not start")
	}
	select {
	case <-warm:
	case <-time.After(60 * time.Second):
		stop()
		return nil, fmt.Errorf("the runtime logged no %q within 60s", ready)
	}
	return p, nil
}

// claimResult is what `slipway claim` prints.
type claimResult struct {
	RunID, SandboxID, Generation, Output string
	Warm                                 bool
	ExitCode                             int
}

func (p *runtimeProc) claim(sh shell, quiet bool, command ...string) (*claimResult, error) {
	args := append([]string{"claim", "--runtime", p.server, "--token-file", p.token, "--pool", "agents", "--tenant", "demo", "--"}, command...)
	var b []byte
	var err error
	if quiet {
		b, err = exec.Command(sh.bin, args...).Output()
	} else {
		b, err = sh.capture(args...)
	}
	if err != nil {
		return nil, err
	}
	var res claimResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("claim printed no JSON: %v\n%s", err, b)
	}
	if quiet {
		return &res, nil
	}
	fmt.Printf("  run %s in sandbox %s, generation %s, warm %v, exit %d\n", res.RunID, res.SandboxID, res.Generation, res.Warm, res.ExitCode)
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		fmt.Printf("  > %s\n", l)
	}
	return &res, nil
}

// firstRun claims a sandbox of the active generation, runs a command in
// it, and prints the run manifest.
func (p *runtimeProc) firstRun(sh shell) (string, error) {
	section("claim", "a sandbox of the active generation: run a command in it, release it")
	res, err := p.claim(sh, false, "sh", "-c", "echo hello from $(pwd) as uid $(id -u); cat /etc/machine-id")
	if err != nil {
		return "", err
	}
	section("runs show", "the run manifest: which exact artifacts and policies produced the run")
	return res.RunID, sh.run(0, "runs", "show", res.RunID, "--state", "state")
}

// releaseQuery asks which runs used one of Slipway's own Go dependencies:
// the runtime indexed the released control plane's and runner's SBOM
// attestations, so the first run is among them.
func (p *runtimeProc) releaseQuery(sh shell, rel *selfRelease, run string) error {
	section("operator", "which runs were made of an artifact containing %s? (Slipway's own dependency, from the release's SBOM attestations)", rel.cobra)
	b, err := sh.capture("runs", "query", "--package", rel.cobra, "--runtime", p.server, "--token-file", p.token)
	if err != nil {
		return err
	}
	fmt.Print(indentText(string(b)))
	for _, id := range strings.Fields(string(b)) {
		if id == run {
			return nil
		}
	}
	return fmt.Errorf("runs query --package %s did not find run %s (its control plane %s holds it)", rel.cobra, run, rel.controlPlane)
}

// rollout rolls the pool out to g2 while a run is open on g1: at the
// drain deadline the rollout checkpoints the run and resumes it on g2,
// where its owner finds it with every file as it was; question 6 and the
// run's manifest answer the operator afterwards.
func (p *runtimeProc) rollout(ctx context.Context, sh shell, g2 string) (*summary, error) {
	sum := &summary{}
	return sum, p.rolloutTo(ctx, sh, g2, sum)
}

// summary is what the demo's last lines say.
type summary struct {
	movedRun, checkpoint, newRun, pkg string
	files, runsWithPkg                int
}

func (p *runtimeProc) rolloutTo(ctx context.Context, sh shell, g2 string, sum *summary) error {
	open, err := p.openRunOnG1(ctx, sh)
	if err != nil {
		return err
	}
	section("rollout start", "to g2: compatibility, warm, prove (evidence signed), route, drain, remove, retain; one commit each")
	drive := []string{"rollout", "start", "--repo", "config.git", "--pool", "agents", "--to", g2, "--runtime", p.server, "--token-file", p.token,
		"--sign-key", filepath.Join("policies", "release.key"), "--wait"}
	driven, err := sh.start(drive)
	if err != nil {
		return err
	}
	if err := sh.showCheckpointDrain(g2, open.grant.RunID); err != nil {
		return err
	}
	section("claim", "a new claim during the drain gets g2, with the agent's tools on PATH")
	nr, err := p.claim(sh, false, "sh", "-c", "agent-lint --version && agent-run echo tools from $AGENT_CACHE")
	if err != nil {
		return err
	}
	sum.newRun = nr.RunID
	select {
	case err := <-driven:
		if err != nil {
			return fmt.Errorf("rollout start --wait: %v", err)
		}
	case <-time.After(90 * time.Second):
		return fmt.Errorf("the rollout did not end")
	}
	section("rollout status", "succeeded: step 5 checkpointed the open run and resumed it on g2; g1 retained for its rollback and restore windows")
	if err := sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents"); err != nil {
		return err
	}
	if err := showDrainCommit(sh.dir, open.grant.RunID); err != nil {
		return err
	}
	if sum.checkpoint, err = open.resumedOnG2(ctx, sh, p, g2); err != nil {
		return err
	}
	sum.movedRun, sum.files = open.grant.RunID, strings.Count(open.hashes, "\n")

	section("operator", "which exact artifacts and policies produced the moved run? (g2 now, and its checkpoint)")
	if err := sh.run(0, "runs", "show", sum.movedRun, "--runtime", p.server, "--token-file", p.token); err != nil {
		return err
	}
	pkg := busyboxPackage()
	section("operator", "which runs used a template that contains %s? (from the templates' SBOM attestations)", pkg)
	b, err := sh.capture("runs", "query", "--package", pkg, "--runtime", p.server, "--token-file", p.token)
	if err != nil {
		return err
	}
	fmt.Print(indentText(string(b)))
	sum.pkg, sum.runsWithPkg = pkg, len(strings.Fields(string(b)))
	return nil
}

// rolloutQuiet rolls the pool out to g with nothing running: the proofs,
// then the status.
func (p *runtimeProc) rolloutQuiet(sh shell, label, g string) error {
	section("rollout start", "to %s: the same seven steps and proofs; nothing runs on the old generation, so the drain is short", label)
	if err := sh.run(0, "rollout", "start", "--repo", "config.git", "--pool", "agents", "--to", g, "--runtime", p.server, "--token-file", p.token,
		"--sign-key", filepath.Join("policies", "release.key"), "--wait"); err != nil {
		return err
	}
	section("rollout status", "succeeded: %s active, its template's tests passed in a proof sandbox", label)
	return sh.run(0, "rollout", "status", "--repo", "config.git", "--pool", "agents")
}

func indentText(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// busyboxPackage is busybox@VERSION as syft's binary classifier names the
// busybox both demo templates are built on.
func busyboxPackage() string {
	out, _ := exec.Command("/bin/busybox").CombinedOutput()
	first, _, _ := strings.Cut(string(out), "\n")
	for _, f := range strings.Fields(first) {
		if v, ok := strings.CutPrefix(f, "v"); ok && strings.Count(v, ".") >= 1 {
			return "busybox@" + v
		}
	}
	return "busybox@unknown"
}

// start runs slipway args in the background, its output indented, and
// returns where its end will come.
func (sh shell) start(args []string) (<-chan error, error) {
	fmt.Printf("$ slipway %s &\n", strings.Join(args, " "))
	cmd := exec.Command(sh.bin, args...)
	cmd.Dir = sh.dir
	out := newIndent(os.Stdout)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	driven := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.Flush()
		driven <- err
	}()
	return driven, nil
}

// logMsg is the message of a runtime log line: its msg when the line is a
// JSON record (runtime serve's default --log-format), else the line.
func logMsg(line string) string {
	var rec struct {
		Msg *string `json:"msg"`
	}
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != nil {
		return *rec.Msg
	}
	return line
}
