package pin_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// BenchmarkB1PinVsCrane is benchmark B1: pin a generated tree of 200 YAML
// files holding 500 distinct references (50 repositories x 10 tags) in Debian's
// docker-registry behind a proxy adding 20 ms per request, and print, in one
// run, slipway's `pin --write` time, a `crane digest` loop over the same
// references, and the ideal ceil(500/concurrency) x 20 ms.
//
// It runs the built binaries: $SLIPWAY_BIN and $CRANE (make bench sets both).
// BENCH_SMOKE=1 shrinks it to seconds.
func BenchmarkB1PinVsCrane(b *testing.B) {
	slipway := need.Env(b, "SLIPWAY_BIN", "the slipway binary to time (make bench sets it)")
	crane := need.Env(b, "CRANE", "the crane binary to time against (make bench sets it)")
	repos, tags, files := 50, 10, 200
	if os.Getenv("BENCH_SMOKE") != "" {
		repos, tags, files = 5, 4, 10
	}
	const latency = 20 * time.Millisecond
	const concurrency = 16

	reg := registrytest.NewDistribution(b)
	proxy := registrytest.StartFaultProxy(b, reg.URL())
	host := strings.TrimPrefix(proxy.URL(), "http://")
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed
	refs := pushB1Images(b, strings.TrimPrefix(reg.URL(), "http://"), host, repos, tags, rng)
	src := b.TempDir()
	writeB1Tree(b, src, refs, files, rng)
	proxy.SetLatency(latency)

	var pinTime time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "tree")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			b.Fatal(err)
		}
		proxy.ResetStats()
		b.StartTimer()
		start := time.Now()
		if os.Getenv("B1_DEBUG") != "" {
			fmt.Printf("B1 debug: pin starts at %v\n", start.Format("15:04:05.000"))
		}
		out, err := exec.Command(slipway, "pin", "--write", "--concurrency", fmt.Sprint(concurrency), dir).CombinedOutput()
		pinTime = time.Since(start)
		if err != nil {
			b.Fatalf("slipway pin: %v\n%s", err, out)
		}
		b.StopTimer()
		lint, err := exec.Command(slipway, "lint", dir).CombinedOutput()
		if err != nil {
			b.Fatalf("tree not clean after pin --write: %v\n%s", err, lint)
		}
		b.StartTimer()
	}
	peak := proxy.PeakInFlight()
	if lg := proxy.Log(); len(lg) > 0 && os.Getenv("B1_DEBUG") != "" {
		first, last := lg[0].At, lg[len(lg)-1].At
		fmt.Printf("B1 debug: requests answered from %v to %v (span %v)\n", first.Format("15:04:05.000"), last.Format("15:04:05.000"), last.Sub(first))
		for i := 0; i < len(lg); i += len(lg) / 10 {
			fmt.Printf("  #%d at +%v %s %s\n", i, lg[i].At.Sub(first), lg[i].Method, lg[i].Path)
		}
	}
	kinds := map[string]int{}
	for _, r := range proxy.Log() {
		k := r.Method + " " + r.Path
		if i := strings.Index(r.Path, "/manifests/"); i >= 0 {
			k = r.Method + " manifest"
		}
		kinds[fmt.Sprintf("%s %d", k, r.Status)]++
	}

	start := time.Now()
	for _, r := range refs {
		if out, err := exec.Command(crane, "digest", r).CombinedOutput(); err != nil {
			b.Fatalf("crane digest %s: %v\n%s", r, err, out)
		}
	}
	craneTime := time.Since(start)
	ideal := time.Duration(math.Ceil(float64(len(refs))/concurrency)) * latency

	b.ReportMetric(pinTime.Seconds(), "slipway-s")
	b.ReportMetric(craneTime.Seconds(), "crane-loop-s")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(pinTime.Seconds()/ideal.Seconds(), "x-ideal")
	b.ReportMetric(craneTime.Seconds()/pinTime.Seconds(), "crane/slipway")
	fmt.Printf("B1: %d refs in %d files, %v per request, concurrency %d (peak in flight %d, requests %v)\n", len(refs), files, latency, concurrency, peak, kinds)
	fmt.Printf("B1: slipway pin --write %8.3fs\n", pinTime.Seconds())
	fmt.Printf("B1: crane digest loop   %8.3fs  (%.1fx slipway)\n", craneTime.Seconds(), craneTime.Seconds()/pinTime.Seconds())
	fmt.Printf("B1: ideal               %8.3fs  (slipway at %.2fx ideal; target <= 2x)\n", ideal.Seconds(), pinTime.Seconds()/ideal.Seconds())
}

// pushB1Images pushes repos x tags small distinct images straight to the
// registry (not through the slow proxy) and returns the references as the
// benchmark's clients see them, through the proxy.
func pushB1Images(b *testing.B, direct, viaProxy string, repos, tags int, rng *rand.Rand) []string {
	b.Helper()
	type job struct {
		repoTag string
		seed    []byte
	}
	var jobs []job
	for r := range repos {
		for t := range tags {
			seed := make([]byte, 512)
			for i := range seed {
				seed[i] = byte(rng.UintN(256))
			}
			jobs = append(jobs, job{fmt.Sprintf("bench/svc-%02d:v1.%d.0", r, t), seed})
		}
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for j := range ch {
				if err := pushSeeded(direct+"/"+j.repoTag, j.seed); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	refs := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ch <- j
		refs = append(refs, viaProxy+"/"+j.repoTag)
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return refs
}

func pushSeeded(ref string, content []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "data", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	tw.Write(content)
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return remote.Write(tag, img, remote.WithContext(context.Background()))
}

// writeB1Tree spreads the references over files Deployments, each with a
// random annotation so about half the bytes are random (fixed seed).
func writeB1Tree(b *testing.B, dir string, refs []string, files int, rng *rand.Rand) {
	b.Helper()
	per := (len(refs) + files - 1) / files
	for f := range files {
		var sb strings.Builder
		lo, hi := f*per, min((f+1)*per, len(refs))
		for i := lo; i < hi; i++ {
			noise := make([]byte, 96)
			for k := range noise {
				noise[k] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.UintN(36)]
			}
			fmt.Fprintf(&sb, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\n  annotations:\n    bench.slipway.dev/noise: %s\nspec:\n  template:\n    spec:\n      containers:\n        - name: main\n          image: %s\n", i, noise, refs[i])
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.yaml", f)), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
