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
func templates(ctx context.Context, sh shell, work, host, repoRoot string) error {
	section("base image", "Debian's busybox-static unpacked, made an OCI image by slipway itself")
	base := filepath.Join(work, "base-rootfs")
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "fixtures/base/busybox-rootfs.sh"), base).CombinedOutput()
	if err != nil {
		return fmt.Errorf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	if err := sh.run(0, "image", "from-dir", base, "--push", host+"/slipway/base:busybox"); err != nil {
		return err
	}
	tdir := filepath.Join(work, "templates")
	if err := copyTree(filepath.Join(repoRoot, "templates"), tdir, ""); err != nil {
		return err
	}
	if err := replaceAll(tdir, "127.0.0.1:5000", host); err != nil {
		return err
	}

	section("template build", "a base given by tag is refused unless --resolve-base pins it (exit 1)")
	minimal := filepath.Join("templates", "minimal", "template.yaml")
	if err := sh.run(1, "template", "build", minimal); err != nil {
		return err
	}
	var ids []string
	for _, name := range []string{"minimal", "agent-tools", "minimal"} {
		section("template build", "%s: steps in bubblewrap, scrub, scan, freeze, smoke tests, SBOM, push by digest", name)
		b, err := sh.capture("template", "build", filepath.Join("templates", name, "template.yaml"),
			"--resolve-base", "--push", host+"/templates/"+name, "--oci-layout", "layout")
		if err != nil {
			return err
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
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("template build printed no JSON: %v\n%s", err, b)
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
		if name == "minimal" {
			ids = append(ids, r.TemplateID)
		}
	}
	section("reproducible", "minimal built twice")
	if ids[0] != ids[1] {
		return fmt.Errorf("minimal built twice gave %s and %s", ids[0], ids[1])
	}
	fmt.Printf("  same digest both times: %s\n", ids[0])

	section("template scan", "the published image, scanned alone")
	return sh.run(0, "template", "scan", host+"/templates/minimal@"+ids[0])
}

// capture runs slipway and returns its stdout; stderr is shown indented.
func (s shell) capture(args ...string) ([]byte, error) {
	fmt.Printf("$ slipway %s\n", strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, indent{os.Stdout}
	if err := cmd.Run(); err != nil {
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
