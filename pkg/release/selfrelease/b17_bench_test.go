package selfrelease

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkB17Release is B17: a release of Slipway's programs for
// linux/amd64 and linux/arm64 (what make release runs: build, SBOMs,
// provenance, checksums and their signature, image indexes in an OCI
// layout; no push) beside its floor, a plain go build loop with the same
// flags and environment, both with Go's build cache warm (a first release
// warms it, untimed). The aim: within 1.2x of the floor, image assembly
// under 10% of the release. It prints and reports the ratio.
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
	var floor, total, images time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := floorBuild(ctx, o, b.TempDir()); err != nil {
			b.Fatal(err)
		}
		floor += time.Since(t0)
		r := release()
		total += time.Duration(r.Seconds.Total * float64(time.Second))
		images += time.Duration(r.Seconds.Images * float64(time.Second))
	}
	ratio, share := total.Seconds()/floor.Seconds(), images.Seconds()/total.Seconds()
	b.ReportMetric(ratio, "x-floor")
	b.ReportMetric(100*share, "%images")
	b.ReportMetric(floor.Seconds()/float64(b.N), "s-floor")
	b.ReportMetric(total.Seconds()/float64(b.N), "s-release")
	fmt.Printf("B17 %s %s: floor (go build loop) %.1fs, release %.1fs: %.2fx the floor (aim <= 1.2x); image assembly %.1fs, %.1f%% of the release (aim < 10%%)\n",
		strings.Join(o.Platforms, ","), strings.Join(o.Programs, ","), floor.Seconds()/float64(b.N), total.Seconds()/float64(b.N), ratio, images.Seconds()/float64(b.N), 100*share)
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
