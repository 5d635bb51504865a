package template

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/registrytest"

	"github.com/slipway-dev/slipway/testharness/need"
)

// BenchmarkB2FreezeVsTarCrane is benchmark B2: freeze a generated tree of
// 20,000 files and 300 MB (fixed seed, about half the bytes random) and push
// it, with `slipway image from-dir --push` versus GNU tar + `crane append` of
// the same tree to the same Debian docker-registry, in one run. It prints both
// times, the ratio (target: slipway at least 1.5x faster) and the digests of
// two slipway builds, which must be identical.
//
// It runs the built binaries: $SLIPWAY_BIN and $CRANE (make bench sets both).
// BENCH_SMOKE=1 shrinks the tree to 500 files and 5 MB.
func BenchmarkB2FreezeVsTarCrane(b *testing.B) {
	sampler := benchtable.Start()
	slipway, crane := need.Env(b, "SLIPWAY_BIN", "make bench sets it"), need.Env(b, "CRANE", "make bench sets it")
	files, total := 20000, 300<<20
	if os.Getenv("BENCH_SMOKE") != "" {
		files, total = 500, 5<<20
	}
	reg := registrytest.NewDistribution(b)
	host := reg.Addr()
	tree := filepath.Join(b.TempDir(), "tree")
	genTree(b, tree, files, total)
	// Both tools read the same warm tree: flush the writes, then read it once.
	if out, err := exec.Command("sh", "-c", "sync && tar -cf - -C "+tree+" . | cat >/dev/null").CombinedOutput(); err != nil {
		b.Fatalf("warm-up: %v\n%s", err, out)
	}

	var slipwayTime time.Duration
	var digests []string
	for i := 0; i < 2; i++ { // two builds: the second proves the digest is reproducible
		start := time.Now()
		out, err := exec.Command(slipway, "image", "from-dir", tree, "--push", fmt.Sprintf("%s/b2/slipway:run%d", host, i)).CombinedOutput()
		if i == 0 {
			slipwayTime = time.Since(start)
		}
		if err != nil {
			b.Fatalf("slipway image from-dir: %v\n%s", err, out)
		}
		s := strings.TrimSpace(string(out))
		digests = append(digests, s[strings.LastIndex(s, "@")+1:])
	}

	layerTar := filepath.Join(b.TempDir(), "layer.tar")
	start := time.Now()
	if out, err := exec.Command("tar", "-cf", layerTar, "-C", tree, ".").CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}
	if out, err := exec.Command(crane, "append", "-f", layerTar, "-t", host+"/b2/crane:latest").CombinedOutput(); err != nil {
		b.Fatalf("crane append: %v\n%s", err, out)
	}
	peerTime := time.Since(start)

	for b.Loop() {
		// The figures above are the measurement; b.Loop keeps the harness happy with one cheap pass.
	}
	ratio := peerTime.Seconds() / slipwayTime.Seconds()
	b.ReportMetric(slipwayTime.Seconds(), "slipway-s")
	b.ReportMetric(peerTime.Seconds(), "tar+crane-s")
	b.ReportMetric(ratio, "speedup")
	fmt.Printf("B2: %d files, %d MB, pushed to docker-registry at %s\n", files, total>>20, host)
	fmt.Printf("B2: slipway image from-dir --push   %8.3fs\n", slipwayTime.Seconds())
	fmt.Printf("B2: tar -cf + crane append          %8.3fs\n", peerTime.Seconds())
	fmt.Printf("B2: speedup %.2fx (target >= 1.5x)\n", ratio)
	fmt.Printf("B2: digests of two builds: %s %s (identical: %v)\n", digests[0], digests[1], digests[0] == digests[1])
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B2", What: fmt.Sprintf("%sfreeze and push %d files / %d MB", smoke, files, total>>20),
		Slipway: fmt.Sprintf("%.2f s", slipwayTime.Seconds()), Peer: fmt.Sprintf("GNU tar + crane append %.2f s", peerTime.Seconds()),
		Ratio: slipwayTime.Seconds() / peerTime.Seconds(), Target: "<= 0.67x (1.5x faster)", Met: ratio >= 1.5}))
	if digests[0] != digests[1] {
		b.Fatal("two builds of the same tree gave different digests")
	}
}

// genTree writes n files totalling about size bytes under dir in a few
// hundred folders; half of each file is random bytes, half repeated text,
// from a fixed seed.
func genTree(b *testing.B, dir string, n, size int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(42, 7))
	per := size / n
	buf := make([]byte, per)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i%200), fmt.Sprintf("s%02d", i%17))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		half := per / 2
		for k := 0; k < half; k++ {
			buf[k] = byte(rng.UintN(256))
		}
		for k := half; k < per; k++ {
			buf[k] = "slipway freezes workspaces "[k%27]
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.dat", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
