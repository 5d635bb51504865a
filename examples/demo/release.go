package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
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
// provenance, images on an empty base), pushes its images to the demo's
// registry by digest, signed and attested (SBOM, provenance) with the
// demo's key, and tags them last. Go's build cache makes it a link, not a
// compile, once `make build` has run (about 10 s on 2 cores).
func release(sh shell, work, host, repoRoot string) (*selfRelease, error) {
	section("release", "Slipway releases itself: a snapshot of this tree, its images signed with SBOM and SLSA provenance attestations")
	rs := shell{bin: sh.bin, dir: repoRoot} // slipway release builds the module in its folder
	b, err := rs.capture("release", "--snapshot", "--platform", "linux/"+runtime.GOARCH, "--out", filepath.Join(work, "release"),
		"--sign-key", filepath.Join(work, "policies", "release.key"), "--offline-no-tlog", "--push", host+"/"+releaseRepo, "-o", "json")
	if err != nil {
		return nil, err
	}
	var res struct {
		Version string
		Images  []struct{ Program, Digest, Ref, Tag string }
		Seconds struct{ Build, Total float64 }
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
	fmt.Printf("  %s: built in %.1fs, released in %.1fs\n", res.Version, res.Seconds.Build, res.Seconds.Total)
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
