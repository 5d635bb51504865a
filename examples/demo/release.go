package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// releaseRepo is where the demo pushes Slipway's own snapshot release, under
// the demo's registry; the policy's slipway-release rule matches it.
const releaseRepo = "slipway-dev"

// selfRelease is Slipway's own snapshot release as the demo uses it: the
// control plane (the slipway image) and the runner (the slipway-runner
// image), pushed by digest, signed and attested.
type selfRelease struct {
	version, controlPlane, runner string
	// cobra is github.com/spf13/cobra@VERSION, one of Slipway's own Go
	// dependencies (go.mod), in the control plane's SBOM.
	cobra string
}

// release builds Slipway's snapshot release of this tree for the host's
// platform with `slipway release` (reproducible binaries, SBOMs, SLSA
// provenance, images on an empty base), or reuses the one built for this
// commit (releaseDir), then publishes its images to the demo's registry
// with `slipway release --from`: by digest, signed and attested (SBOM,
// provenance) with the demo's key, tags last.
func release(sh shell, work, host, repoRoot string) (*selfRelease, error) {
	section("release", "Slipway releases itself: a snapshot of this tree, its images signed with SBOM and SLSA provenance attestations")
	dir, err := releaseDir(shell{bin: sh.bin, dir: repoRoot}, work, repoRoot)
	if err != nil {
		return nil, err
	}
	b, err := sh.capture("release", "--from", dir, "--sign-key", filepath.Join("policies", "release.key"), "--offline-no-tlog",
		"--push", host+"/"+releaseRepo, "-o", "json")
	if err != nil {
		return nil, err
	}
	var res struct {
		Version string
		Images  []struct{ Program, Digest, Ref, Tag string }
		Seconds struct{ Push float64 }
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("slipway release printed no JSON: %v\n%s", err, b)
	}
	r := &selfRelease{version: res.Version}
	for _, im := range res.Images {
		fmt.Printf("  %-15s %s (tag %s)\n", im.Program, im.Ref, im.Tag)
		switch im.Program {
		case "slipway":
			r.controlPlane = im.Ref
		case "slipway-runner":
			r.runner = im.Ref
		}
	}
	fmt.Printf("  %s: pushed, signed and attested in %.1fs\n", res.Version, res.Seconds.Push)
	if r.controlPlane == "" || r.runner == "" {
		return nil, fmt.Errorf("slipway release pushed no slipway or slipway-runner image: %s", b)
	}
	v, err := requiredVersion(filepath.Join(repoRoot, "go.mod"), "github.com/spf13/cobra")
	if err != nil {
		return nil, err
	}
	r.cobra = "github.com/spf13/cobra@" + v
	section("verify", "the released control plane against the demo's policy: signed, SLSA provenance from slipway release's builder, SBOM (exit 0)")
	if err := sh.run(0, "verify", r.controlPlane, "--policy", filepath.Join("policies", "verification.yaml"), "--kind", "control-plane"); err != nil {
		return nil, err
	}
	return r, nil
}

// requiredVersion is the version go.mod requires of module.
func requiredVersion(gomod, module string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, module)
}

// releaseDir is a snapshot release of the tree at repoRoot for the host's
// platform, unsigned (the demo signs what it publishes with its own key).
// A clean tree's release is kept outside the clone, keyed by commit and
// platform ($SLIPWAY_DEMO_CACHE, default the user's cache folder), and
// reused: two releases of one commit are identical, and the build is the
// demo's slowest step when other builds share the machine. A dirty tree's
// release is built into the work folder each time. $SLIPWAY_DEMO_RELEASE
// names another release folder to use instead (another build's: a
// version-skew run, tools/skew.sh).
func releaseDir(rs shell, work, repoRoot string) (string, error) {
	if dir := os.Getenv("SLIPWAY_DEMO_RELEASE"); dir != "" { // another build's (tools/skew.sh)
		fmt.Printf("  the snapshot release given by $SLIPWAY_DEMO_RELEASE: %s\n", dir)
		return dir, nil
	}
	commit, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD in %s: %w", repoRoot, err)
	}
	status, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain").Output()
	if err != nil {
		return "", fmt.Errorf("git status in %s: %w", repoRoot, err)
	}
	build := func(out string) error {
		_, err := rs.capture("release", "--snapshot", "--platform", "linux/"+runtime.GOARCH, "--out", out)
		return err
	}
	if len(status) > 0 {
		fmt.Println("  the tree has uncommitted changes: its release is built for this run only")
		out := filepath.Join(work, "release")
		return out, build(out)
	}
	cache := os.Getenv("SLIPWAY_DEMO_CACHE")
	if cache == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(c, "slipway", "demo-release")
	}
	dir := filepath.Join(cache, strings.TrimSpace(string(commit))+"-linux-"+runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, "checksums.txt")); err == nil {
		fmt.Printf("  reusing the snapshot release of commit %s built earlier: %s\n", strings.TrimSpace(string(commit))[:12], dir)
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := build(filepath.Join(tmp, "out")); err != nil {
		return "", err
	}
	// One commit's release is kept: the older ones go (about 250 MB each).
	old, _ := filepath.Glob(filepath.Join(cache, "*-linux-*"))
	for _, o := range old {
		os.RemoveAll(o)
	}
	if err := os.Rename(filepath.Join(tmp, "out"), dir); err != nil {
		return "", err
	}
	return dir, nil
}
