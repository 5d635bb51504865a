package selfrelease

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// BenchmarkB17Release is B17: a release of Slipway's programs for
// linux/amd64 and linux/arm64 (what make release runs: build, SBOMs,
// provenance, checksums and their signature, image indexes in an OCI
// layout; no push) beside its floor, a plain go build loop with the same
// flags and environment, both with Go's build cache warm (a first release
// warms it, untimed). The aim: within 1.2x of the floor, image assembly
// under 10% of the release. The sides take turns going first (-benchtime
// 3x runs three of each). It prints the ratio, the CPU time of each side,
// the load average, and each release's phases, and emits its row for make
// bench's table (testharness/benchtable).
//
//	go test -run '^$' -bench B17 -benchtime 1x -timeout 60m ./pkg/release/selfrelease/
//	BENCH_SMOKE=1 go test -run '^$' -bench B17 -benchtime 1x ./pkg/release/selfrelease/  # host platform, slipway-cmp and slipway-runner
func BenchmarkB17Release(b *testing.B) {
	if _, err := exec.LookPath("go"); err != nil {
		b.Skip("no go command")
	}
	o := Options{Dir: moduleRoot, Snapshot: true, Platforms: Platforms, Programs: Programs, RunnerImage: runnerImage}
	if os.Getenv("BENCH_SMOKE") != "" {
		o.Platforms, o.Programs = []string{runtime.GOOS + "/" + runtime.GOARCH}, []string{"slipway-cmp", "slipway-runner"}
	}
	sv, _ := testSigner(b)
	o.Signer = sv
	ctx := context.Background()
	release := func() *Result {
		o := o
		o.Out = filepath.Join(b.TempDir(), "dist")
		r, err := Release(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	release() // warms the build cache for these flags
	load0 := loadAverage()
	var floor, total, images, floorCPU, releaseCPU time.Duration
	var phases []Timings
	sampler := benchtable.Start()
	for i := 0; b.Loop(); i++ {
		// The sides take turns going first, so that a change in the
		// machine's load does not always fall on the same one.
		sides := []func(){func() {
			t0, c0 := time.Now(), cpuTime()
			if err := floorBuild(ctx, o, b.TempDir()); err != nil {
				b.Fatal(err)
			}
			floor += time.Since(t0)
			floorCPU += cpuTime() - c0
		}, func() {
			c0 := cpuTime()
			r := release()
			releaseCPU += cpuTime() - c0
			total += time.Duration(r.Seconds.Total * float64(time.Second))
			images += time.Duration(r.Seconds.Images * float64(time.Second))
			phases = append(phases, r.Seconds)
		}}
		sides[i%2]()
		sides[1-i%2]()
	}
	ratio, share := total.Seconds()/floor.Seconds(), images.Seconds()/total.Seconds()
	b.ReportMetric(ratio, "x-floor")
	b.ReportMetric(100*share, "%images")
	b.ReportMetric(floor.Seconds()/float64(b.N), "s-floor")
	b.ReportMetric(total.Seconds()/float64(b.N), "s-release")
	fmt.Printf("B17 %s %s: floor (go build loop) %.1fs, release %.1fs: %.2fx the floor (aim <= 1.2x); image assembly %.1fs, %.1f%% of the release (aim < 10%%)\n",
		strings.Join(o.Platforms, ","), strings.Join(o.Programs, ","), floor.Seconds()/float64(b.N), total.Seconds()/float64(b.N), ratio, images.Seconds()/float64(b.N), 100*share)
	fmt.Printf("B17 CPU (user+system, this process and its children): floor %.1fs, release %.1fs: %.2fx; load average %s before, %s after\n",
		floorCPU.Seconds()/float64(b.N), releaseCPU.Seconds()/float64(b.N), releaseCPU.Seconds()/floorCPU.Seconds(), load0, loadAverage())
	b.ReportMetric(releaseCPU.Seconds()/floorCPU.Seconds(), "x-floor-cpu")
	what := "release of " + strings.Join(o.Programs, ", ") + " for " + strings.Join(o.Platforms, ", ")
	if os.Getenv("BENCH_SMOKE") != "" {
		what += " (smoke)"
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B17", What: what,
		Slipway: fmt.Sprintf("%.1f s (image assembly %.1f%%)", total.Seconds()/float64(b.N), 100*share),
		Peer:    fmt.Sprintf("go build loop %.1f s", floor.Seconds()/float64(b.N)),
		Ratio:   ratio, Target: "<= 1.2x floor, images < 10%", Met: ratio <= 1.2 && share < 0.10,
		Settings: fmt.Sprintf("same flags, platforms and go build -p; CPU %.2fx the floor's", releaseCPU.Seconds()/floorCPU.Seconds())}))
	for i, t := range phases {
		fmt.Printf("B17 release %d phases: prepare %.2fs, build %.2fs, then sbom wait %.2fs, images %.2fs, files %.2fs (tail after the last go build %.2fs); background work: hash %.2fs, sbom %.2fs, image %.2fs, image sbom %.2fs\n",
			i+1, t.Prepare, t.Build, t.SBOM, t.Images, t.Files, t.Tail, t.HashWork, t.SBOMWork, t.ImageWork, t.ImageSBOMWork)
	}
}

// cpuTime is the CPU time (user and system) of this process and of its
// children waited for: on a shared machine the wall-clock ratio moves with
// the others' load, the CPU one much less.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return 0
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids); err != nil {
		return 0
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// loadAverage is the machine's 1-minute load average, as /proc/loadavg says.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// floorBuild is the plain go build loop: one go build per platform with
// the release's flags and environment, nothing else.
func floorBuild(ctx context.Context, o Options, out string) error {
	for _, p := range o.Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		args := append([]string{"build"}, buildFlags("v0.0.0-floor", strings.Repeat("0", 40), false)...)
		args = append(args, "-o", out+string(filepath.Separator))
		for _, prog := range o.Programs {
			args = append(args, "./cmd/"+prog)
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = o.Dir, append(os.Environ(), buildEnv(goos, goarch)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
	}
	return nil
}
