package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// templates builds a base image from Debian's busybox-static, then the two
// sample templates: refused without a pinned base, built, scrubbed, scanned,
// tested, frozen reproducibly and published by digest, with SBOMs.
// built names the published templates, by reference with digest.
type built struct{ agentTools, minimal string }

func templates(ctx context.Context, sh shell, work, host, repoRoot string) (*built, error) {
	baseRef, err := prepare(ctx, sh, work, host, repoRoot)
	if err != nil {
		return nil, err
	}
	policy := filepath.Join("policies", "verification.yaml")
	section("template build", "a base given by tag is refused unless --resolve-base pins it (exit 2, an input error, as sign on a tag)")
	minimal := filepath.Join("templates", "minimal", "template.yaml")
	if err := sh.run(2, "template", "build", minimal); err != nil {
		return nil, err
	}
	var ids []string
	var agentTools, minimalRef string
	for _, name := range []string{"minimal", "agent-tools", "minimal"} {
		ref, id, err := buildTemplate(sh, host, name)
		if err != nil {
			return nil, err
		}
		if name == "minimal" {
			ids = append(ids, id)
			minimalRef = ref
		} else {
			agentTools = ref
		}
	}
	section("reproducible", "minimal built twice")
	if ids[0] != ids[1] {
		return nil, fmt.Errorf("minimal built twice gave %s and %s", ids[0], ids[1])
	}
	fmt.Printf("  same digest both times: %s\n", ids[0])

	section("template scan", "the published image, scanned alone")
	if err := sh.run(0, "template", "scan", host+"/templates/minimal@"+ids[0]); err != nil {
		return nil, err
	}

	section("verify", "agent-tools against the policy: key, provenance builder and build type, SBOM (exit 0)")
	if err := sh.run(0, "verify", agentTools, "--policy", policy, "--kind", "workspace-template"); err != nil {
		return nil, err
	}
	section("verify", "the same template by tag: mutable references are refused (exit 1)")
	if err := sh.run(1, "verify", host+"/templates/agent-tools:demo", "--policy", policy, "--kind", "workspace-template"); err != nil {
		return nil, err
	}
	section("verify", "the unsigned base image as if it were a template: every missing check is named (exit 1)")
	if err := sh.run(1, "verify", baseRef, "--policy", policy, "--kind", "workspace-template"); err != nil {
		return nil, err
	}
	return &built{agentTools: agentTools, minimal: minimalRef}, nil
}

// prepare makes the base image, copies the sample templates (the
// registry's address filled in), generates the release key pair and puts
// the verification policy beside it, in work. It returns the base image's
// reference.
func prepare(ctx context.Context, sh shell, work, host, repoRoot string) (string, error) {
	section("base image", "Debian's busybox-static unpacked, made an OCI image by slipway itself")
	base := filepath.Join(work, "base-rootfs")
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "fixtures/base/busybox-rootfs.sh"), base).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	b, err := sh.capture("image", "from-dir", base, "--push", host+"/slipway/base:busybox")
	if err != nil {
		return "", err
	}
	baseRef := strings.TrimSpace(string(b))
	fmt.Printf("  %s\n", baseRef)
	tdir := filepath.Join(work, "templates")
	if err := copyTree(filepath.Join(repoRoot, "templates"), tdir, ""); err != nil {
		return "", err
	}
	if err := replaceAll(tdir, "127.0.0.1:5000", host); err != nil {
		return "", err
	}

	section("keys generate", "a cosign-compatible key pair; the password comes from COSIGN_PASSWORD")
	keys := filepath.Join(work, "policies")
	if err := os.MkdirAll(keys, 0o755); err != nil {
		return "", err
	}
	if err := sh.run(0, "keys", "generate", "--output-key-prefix", filepath.Join("policies", "release")); err != nil {
		return "", err
	}
	policy := filepath.Join("policies", "verification.yaml")
	if err := copyFile(filepath.Join(repoRoot, "examples", "demo", "verification.yaml"), filepath.Join(work, policy)); err != nil {
		return "", err
	}
	return baseRef, nil
}

// buildTemplate builds templates/<name>/template.yaml, publishes it by
// digest, signed and attested, and prints what the build reports. It
// returns the published reference (with digest) and the template's id.
func buildTemplate(sh shell, host, name string) (ref, id string, err error) {
	section("template build", "%s: steps in bubblewrap, scrub, scan, freeze, smoke tests, SBOM, push by digest, sign, attest", name)
	b, err := sh.capture("template", "build", filepath.Join("templates", name, "template.yaml"),
		"--resolve-base", "--push", host+"/templates/"+name+":demo", "--oci-layout", "layout",
		"--sign-key", filepath.Join("policies", "release.key"), "--offline-no-tlog", "--builder-id", "https://slipway.dev/builders/demo")
	if err != nil {
		return "", "", err
	}
	var r struct {
		Name, TemplateID, ContentID, Ref, BaseDigest string
		Scrubbed                                     []struct{ Path, Action string }
		Scan                                         struct{ Files, Dirs int }
		Tests                                        []struct {
			Name   string
			Passed bool
		}
		SBOM struct {
			Files    []struct{ Path string }
			Packages []struct{ Name, Version, Type string }
		}
		Sign struct {
			Signature    struct{ Tag, Status string }
			Attestations []struct{ PredicateType, Status string }
			Tlog         string
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", "", fmt.Errorf("template build printed no JSON: %v\n%s", err, b)
	}
	var scrubbed, tests []string
	for _, s := range r.Scrubbed {
		if s.Action == "removed" || s.Action == "emptied" {
			scrubbed = append(scrubbed, s.Path)
		}
	}
	for _, tt := range r.Tests {
		tests = append(tests, fmt.Sprintf("%s=%v", tt.Name, tt.Passed))
	}
	fmt.Printf("  name        %s\n  templateID  %s\n  contentID   %s\n  ref         %s\n  base        %s\n", r.Name, r.TemplateID, r.ContentID, r.Ref, r.BaseDigest)
	fmt.Printf("  scrubbed    %s\n  scan        clean: %d files, %d dirs\n  tests       %s\n", strings.Join(scrubbed, " "), r.Scan.Files, r.Scan.Dirs, strings.Join(tests, " "))
	fmt.Printf("  sbom        %d packages in %d files\n", len(r.SBOM.Packages), len(r.SBOM.Files))
	fmt.Printf("  signature   %s (%s, %s)\n", r.Sign.Signature.Tag, r.Sign.Signature.Status, r.Sign.Tlog)
	for _, a := range r.Sign.Attestations {
		fmt.Printf("  attestation %s (%s)\n", a.PredicateType, a.Status)
	}
	return r.Ref, r.TemplateID, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// capture runs slipway and returns its stdout; stderr is shown indented.
func (s shell) capture(args ...string) ([]byte, error) {
	fmt.Printf("$ slipway %s\n", strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	var out bytes.Buffer
	errOut := newIndent(os.Stdout)
	cmd.Stdout, cmd.Stderr = &out, errOut
	err := cmd.Run()
	errOut.Flush()
	if err != nil {
		return nil, fmt.Errorf("slipway %s: %w", strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

func replaceAll(dir, old, new string) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, bytes.ReplaceAll(b, []byte(old), []byte(new)), fi.Mode())
	})
}
