package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// generations pins the platform images and the templates into
// generations, verified against the policy, and promotes them into a
// config repository on this machine: the first promotion (minimal), a
// rollout to agent-tools, their diff, a second rollout back to minimal with
// a rotated secret, so both sample templates pass a rollout's proofs, and a
// rollback refused without --rollback.
func generations(ctx context.Context, sh shell, work, here, host string, tmpl *built) error {
	rel, err := release(sh, work, host, filepath.Dir(filepath.Dir(here)))
	if err != nil {
		return err
	}

	section("config init", "a bare config repository for pool agents, with the verification policy and its key")
	if err := sh.run(0, "config", "init", "config.git", "--pool", "agents", "--policy", filepath.Join("policies", "verification.yaml")); err != nil {
		return err
	}

	base := []string{"generation", "create", "--pool", "agents", "--policy", filepath.Join("policies", "verification.yaml")}
	section("generation create", "g1: Slipway's released control plane and runner, minimal template, a secret version; every image verified")
	b, err := sh.capture(append(base, "--out-file", "g1.yaml",
		"--pin", "controlPlane="+rel.controlPlane,
		"--pin", "runner="+rel.runner,
		"--pin", "workspaceTemplate="+tmpl.minimal,
		"--pin", "secretVersion=vault://kv/agents/api-token#3",
		"--control-plane-protocol", "1-2", "--runner-protocol", "1")...)
	if err != nil {
		return err
	}
	g1 := strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", g1)

	section("generation create", "an unsigned image is never pinned: the multi-arch busybox as the runner (exit 1)")
	if err := sh.run(1, append(base, "--out-file", "refused.yaml", "--from", "g1.yaml", "--pin", "runner="+host+"/library/busybox@"+digestOf(sh, host+"/library/busybox:latest"))...); err != nil {
		return err
	}

	section("promote", "g1 into the config repository, active at once (the pool's first generation)")
	if err := sh.run(0, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g1.yaml", "--activate"); err != nil {
		return err
	}
	if err := gitLog(work); err != nil {
		return err
	}
	rt, err := startRuntime(sh, work)
	if err != nil {
		return err
	}
	defer rt.stop()
	firstRun, err := rt.firstRun(sh)
	if err != nil {
		return err
	}
	if err := rt.releaseQuery(sh, rel, firstRun); err != nil {
		return err
	}

	section("generation create", "g2: the agent-tools template instead; every other pin copied from g1")
	b, err = sh.capture(append(base, "--out-file", "g2.yaml", "--from", "g1.yaml", "--pin", "workspaceTemplate="+tmpl.agentTools)...)
	if err != nil {
		return err
	}
	g2 := strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", g2)
	section("promote", "g2 becomes the target (a rollout, later, makes it active)")
	if err := sh.run(0, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g2.yaml"); err != nil {
		return err
	}
	section("generation diff", "g1 and g2, read back by id from the config repository")
	if err := sh.run(0, "generation", "diff", g1, g2, "--repo", "config.git", "--pool", "agents"); err != nil {
		return err
	}
	sum, err := rt.rollout(ctx, sh, g2)
	if err != nil {
		return err
	}

	section("generation create", "g3: the API token rotated to #4, on the minimal template again; every other pin copied from g2")
	b, err = sh.capture(append(base, "--out-file", "g3.yaml", "--from", "g2.yaml", "--pin", "workspaceTemplate="+tmpl.minimal,
		"--pin", "secretVersion=vault://kv/agents/api-token#4")...)
	if err != nil {
		return err
	}
	g3 := strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", g3)
	section("promote", "g3 becomes the target")
	if err := sh.run(0, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g3.yaml"); err != nil {
		return err
	}
	if err := rt.rolloutQuiet(sh, "g3", g3); err != nil {
		return err
	}
	egressRun, err := rt.egressStep(sh)
	if err != nil {
		return err
	}
	if err := controlPlane(sh, work, here, rt); err != nil {
		return err
	}
	section("promote", "g1 again: an older generation needs --rollback, so a re-run never undoes anything (exit 1)")
	if err := sh.run(1, "promote", "--repo", "config.git", "--pool", "agents", "--generation", "g1.yaml"); err != nil {
		return err
	}
	if err := gitLog(work); err != nil {
		return err
	}
	section("summary", "the release loop on embedded defaults")
	fmt.Printf("  release    %s: Slipway's own snapshot release; g1's control plane %s and runner %s, signed, SBOM + SLSA provenance attested\n", rel.version, short(rel.controlPlane), short(rel.runner))
	fmt.Printf("  deps       runs query --package %s found run %s (through the control plane's SBOM)\n", rel.cobra, firstRun)
	fmt.Printf("  templates  agent-tools %s, minimal %s: built in bubblewrap, frozen, signed, SLSA + SBOM attested\n", short(tmpl.agentTools), short(tmpl.minimal))
	fmt.Printf("  g1         %s (minimal): verified, promoted, active (the pool's first generation)\n", g1)
	fmt.Printf("  g2         %s (agent-tools): rolled out in seven steps, six proofs passed, evidence signed\n", g2)
	fmt.Printf("  drain      run %s, open on g1 at the drain deadline: checkpointed (%s), resumed on g2, its %d files unchanged; claim %s got g2\n",
		sum.movedRun, short("@"+sum.checkpoint), sum.files, sum.newRun)
	fmt.Printf("  g3         %s (minimal, token #4): rolled out, proofs passed: both templates' tests passed in a sandbox\n", g3)
	fmt.Printf("  egress     run %s reached the one approved server through its egress proxy, was refused another; both attempts recorded\n", egressRun)
	fmt.Printf("  operator   runs show answers what produced a run; %d runs used a template containing %s\n", sum.runsWithPkg, sum.pkg)
	fmt.Printf("  control    globex's flood got 429s while acme's job ran; a deadline stopped a job with its outcome; a budget refused a job; an old job shown with its old profile\n")
	return nil
}

// short is the digest of a reference, cut to 12 hex digits.
func short(ref string) string {
	_, d, _ := strings.Cut(ref, "@sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return "sha256:" + d
}

// digestOf resolves ref with slipway and returns its digest ("" on error:
// the caller's command then fails visibly).
func digestOf(sh shell, ref string) string {
	b, err := exec.Command(sh.bin, "resolve", ref).Output()
	if err != nil {
		return ""
	}
	_, d, _ := strings.Cut(strings.TrimSpace(string(b)), "@")
	return d
}

// gitLog shows the config repository's history with the git CLI.
func gitLog(work string) error {
	out, err := exec.Command("git", "-C", filepath.Join(work, "config.git"), "log", "--format=  %h %s%n    %(trailers:only,unfold,separator=%x2C )", "main").CombinedOutput()
	if err != nil {
		return fmt.Errorf("git log: %v\n%s", err, out)
	}
	fmt.Printf("$ git -C config.git log\n%s", out)
	return nil
}
