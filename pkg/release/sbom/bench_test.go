package sbom

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/need"
)

// BenchmarkB4SBOMVsSyftCLI times Generate against the syft CLI (same syft version, built from
// tools/go.mod, at its defaults: `syft scan dir:ROOT -o spdx-json`) on the same tree in one run, prints
// both times and the ratio (target: Slipway at most half the CLI's time) and compares the purl sets.
//
//	SYFT=$PWD/bin/syft go test -run '^$' -bench B4 -benchtime 1x ./pkg/release/sbom/             # full
//	BENCH_SMOKE=1 SYFT=$PWD/bin/syft go test -run '^$' -bench B4 -benchtime 1x ./pkg/release/sbom/ # seconds
func BenchmarkB4SBOMVsSyftCLI(b *testing.B) {
	sampler := benchtable.Start()
	cli := need.Env(b, "SYFT", "set it to the syft CLI built from tools/go.mod "+
		"(cd tools && go build -o ../bin/ github.com/anchore/syft/cmd/syft; SYFT=$PWD/bin/syft); make bench does")
	root, what := b4Tree(b)
	files, size := treeStats(b, root)
	ctx := context.Background()

	var proc, prep, step, theirs time.Duration
	var procRSS, theirsRSS int64
	var s *SBOM
	var cliPURLs []string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// one-shot, like the CLI: a fresh process runs Generate once, compiling syft's licence
		// matcher and paying every first-use cost
		start := time.Now()
		procSPDX, rss := runGenerateProcess(b, root)
		proc += time.Since(start)
		procRSS = max(procRSS, rss)

		// the template build's step: the matcher was compiled ahead, while the build ran
		start = time.Now()
		pctx, err := Prepare(ctx)
		prep += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		s, err = Generate(pctx, root, WithDocumentName("b4"))
		step += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(procSPDX, s.SPDXJSON()) {
			b.Error("B4: Generate in another process gave other SPDX bytes")
		}

		start = time.Now()
		var rss2 int64
		cliPURLs, rss2 = runSyftCLI(b, cli, root)
		theirs += time.Since(start)
		theirsRSS = max(theirsRSS, rss2)
	}
	b.StopTimer()

	n := time.Duration(b.N)
	proc, prep, step, theirs = proc/n, prep/n, step/n, theirs/n
	procRatio, stepRatio := proc.Seconds()/theirs.Seconds(), step.Seconds()/theirs.Seconds()
	b.ReportMetric(proc.Seconds(), "slipway-process-s/op")
	b.ReportMetric(step.Seconds(), "slipway-step-s/op")
	b.ReportMetric(theirs.Seconds(), "syftcli-s/op")
	b.ReportMetric(procRatio, "process-ratio")
	b.ReportMetric(stepRatio, "step-ratio")

	verdict := func(r float64) string {
		switch {
		case os.Getenv("BENCH_SMOKE") != "":
			return "not judged on the smoke tree"
		case r > 0.5:
			return "MISSED"
		}
		return "met"
	}
	b.Logf("B4 tree: %s; %d files, %.1f MB", what, files, float64(size)/1e6)
	b.Logf("B4 syft CLI, one process (scan dir: -o spdx-json, default catalogers): %s, max RSS %.0f MB",
		theirs.Round(time.Millisecond), float64(theirsRSS)/1e3)
	b.Logf("B4 slipway Generate, one process (test binary, compiles the licence matcher): %s, max RSS %.0f MB",
		proc.Round(time.Millisecond), float64(procRSS)/1e3)
	b.Logf("B4 slipway Generate in process after Prepare (%s, which a template build runs beside its steps): %s",
		prep.Round(time.Millisecond), step.Round(time.Millisecond))
	b.Logf("B4 ratio slipway/cli (target <= 0.50): one process %.2f (%s); build step %.2f (%s); GOMAXPROCS %d",
		procRatio, verdict(procRatio), stepRatio, verdict(stepRatio), runtime.GOMAXPROCS(0))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B4", What: "SBOM of " + what,
		Slipway: fmt.Sprintf("in the build %.2f s; lone process %.2f s", step.Seconds(), proc.Seconds()), Peer: fmt.Sprintf("syft CLI %.2f s", theirs.Seconds()),
		Ratio: stepRatio, Target: "<= 0.5x (in the build)", Met: stepRatio <= 0.5}))

	var ourPURLs []string
	types := map[string]int{}
	for _, p := range s.Packages() {
		types[p.Type]++
		if p.PURL != "" {
			ourPURLs = append(ourPURLs, p.PURL)
		}
	}
	var byType []string
	for _, t := range slices.Sorted(maps.Keys(types)) {
		byType = append(byType, fmt.Sprintf("%s %d", t, types[t]))
	}
	onlyOurs, onlyCLI := setDiff(ourPURLs, cliPURLs)
	b.Logf("B4 packages: slipway %d (%s), %d distinct purls; syft CLI %d distinct purls",
		len(s.Packages()), strings.Join(byType, ", "), len(set(ourPURLs)), len(set(cliPURLs)))
	if len(onlyOurs) == 0 && len(onlyCLI) == 0 {
		b.Logf("B4 purl sets: identical")
	} else {
		b.Logf("B4 purl sets differ: only slipway %d %s; only syft CLI %d %s", len(onlyOurs), head(onlyOurs), len(onlyCLI), head(onlyCLI))
	}
}

// runSyftCLI scans root with the CLI at its default catalogers and returns the purls of its SPDX
// output and its maximum resident set in KB. The update check is off: it is a network call, not
// cataloging, and there is no network here.
func runSyftCLI(b *testing.B, cli, root string) ([]string, int64) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "cli.spdx.json")
	cmd := exec.Command(cli, "scan", "dir:"+root, "-o", "spdx-json="+out, "-q")
	cmd.Env = append(os.Environ(), "SYFT_CHECK_FOR_APP_UPDATE=false")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	body, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var doc struct {
		Packages []struct {
			ExternalRefs []struct {
				Type    string `json:"referenceType"`
				Locator string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		b.Fatalf("syft CLI output: %v", err)
	}
	var purls []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" {
				purls = append(purls, r.Locator)
			}
		}
	}
	return purls, rss
}

// runGenerateProcess runs TestB4GenerateProcess in a fresh copy of this test binary and returns the
// SPDX document it wrote and its maximum resident set in KB.
func runGenerateProcess(b *testing.B, root string) ([]byte, int64) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "process.spdx.json")
	cmd := exec.Command(exe, "-test.run=^TestB4GenerateProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLIPWAY_B4_ROOT="+root, "SLIPWAY_B4_OUT="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	body, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	return body, rss
}

// TestB4GenerateProcess is BenchmarkB4SBOMVsSyftCLI's one-shot child process: it runs Generate once on
// $SLIPWAY_B4_ROOT and writes the SPDX document to $SLIPWAY_B4_OUT.
func TestB4GenerateProcess(t *testing.T) {
	root, out := os.Getenv("SLIPWAY_B4_ROOT"), os.Getenv("SLIPWAY_B4_OUT")
	if root == "" || out == "" {
		t.Skip("run by BenchmarkB4SBOMVsSyftCLI only")
	}
	s, err := Generate(context.Background(), root, WithDocumentName("b4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, s.SPDXJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// setDiff returns the sorted elements only in a and only in b.
func setDiff(a, b []string) (onlyA, onlyB []string) {
	sa, sb := set(a), set(b)
	for x := range sa {
		if !sb[x] {
			onlyA = append(onlyA, x)
		}
	}
	for x := range sb {
		if !sa[x] {
			onlyB = append(onlyB, x)
		}
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	return onlyA, onlyB
}

func head(xs []string) string {
	if len(xs) > 15 {
		return fmt.Sprintf("%q …", xs[:15])
	}
	return fmt.Sprintf("%q", xs)
}
