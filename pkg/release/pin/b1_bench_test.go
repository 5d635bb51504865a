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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/need"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// BenchmarkB1PinVsCrane is benchmark B1: pin a generated tree of 200 YAML
// files holding 500 distinct references (50 repositories x 10 tags) in Debian's
// docker-registry behind a proxy adding 20 ms per request, at concurrency 16,
// beside the tools a user would run for the same resolution at the same
// concurrency, in one run, the sides interleaved (three rounds, the order
// turning each round; the median of each side):
//
//   - `xargs -P16 -n1 crane digest` over the same references: every one must
//     print a distinct sha256 digest and every crane must exit 0;
//   - `kbld --build-concurrency 16 --registry-insecure -f DIR` over a copy of
//     the same tree: it must exit 0 and its lock file must name a digest for
//     every reference.
//
// It prints the ratios, the requests each side sent, and the ideal
// ceil(500/16) x 20 ms; targets: Slipway within 1.25x of the ideal and at
// least 5x faster than kbld. It emits its rows for make bench's table
// (testharness/benchtable).
//
// It runs the built binaries: $SLIPWAY_BIN, $CRANE and $KBLD (make bench sets
// them). BENCH_SMOKE=1 shrinks it to seconds (one round).
func BenchmarkB1PinVsCrane(b *testing.B) {
	slipway := need.Env(b, "SLIPWAY_BIN", "the slipway binary to time (make bench sets it)")
	crane := need.Env(b, "CRANE", "the crane binary to time against (make bench sets it)")
	kbld := need.Env(b, "KBLD", "the kbld binary to time against (make bench sets it; make tools builds it)")
	xargs := need.Binary(b, "xargs", "findutils")
	repos, tags, files, rounds := 50, 10, 200, 3
	if os.Getenv("BENCH_SMOKE") != "" {
		repos, tags, files, rounds = 5, 4, 10, 1
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
	copyTree := func() string {
		dir := filepath.Join(b.TempDir(), "tree")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			b.Fatal(err)
		}
		return dir
	}

	sides := []struct {
		name string
		run  func() time.Duration
	}{
		{"slipway pin --write", func() time.Duration {
			dir := copyTree()
			start := time.Now()
			out, err := exec.Command(slipway, "pin", "--write", "--concurrency", fmt.Sprint(concurrency), dir).CombinedOutput()
			d := time.Since(start)
			if err != nil {
				b.Fatalf("slipway pin: %v\n%s", err, out)
			}
			if lint, err := exec.Command(slipway, "lint", dir).CombinedOutput(); err != nil {
				b.Fatalf("tree not clean after pin --write: %v\n%s", err, lint)
			}
			return d
		}},
		{"xargs -P16 crane digest", func() time.Duration {
			cmd := exec.Command(xargs, "-P", fmt.Sprint(concurrency), "-n", "1", crane, "digest")
			cmd.Stdin = strings.NewReader(strings.Join(refs, "\n") + "\n")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			out, err := cmd.Output()
			d := time.Since(start)
			if err != nil {
				b.Fatalf("xargs crane digest: %v\n%s", err, stderr.Bytes())
			}
			checkB1Digests(b, "xargs crane digest", strings.Fields(string(out)), len(refs))
			return d
		}},
		{"kbld --build-concurrency 16", func() time.Duration {
			dir := copyTree()
			lock := filepath.Join(b.TempDir(), "kbld.lock.yml")
			cmd := exec.Command(kbld, "-f", dir, "--build-concurrency", fmt.Sprint(concurrency), "--registry-insecure", "--lock-output", lock)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			out, err := cmd.Output()
			d := time.Since(start)
			if err != nil {
				b.Fatalf("kbld: %v\n%s", err, stderr.Bytes())
			}
			if n := strings.Count(string(out), "@sha256:"); n < len(refs) {
				b.Fatalf("kbld printed %d digest references, want at least %d (one per reference)", n, len(refs))
			}
			lk, err := os.ReadFile(lock)
			if err != nil {
				b.Fatalf("kbld lock output: %v", err)
			}
			var digests []string
			for line := range strings.SplitSeq(string(lk), "\n") {
				if i := strings.Index(line, "newImage: "); i >= 0 {
					if j := strings.Index(line, "@"); j >= 0 {
						digests = append(digests, line[j+1:])
					}
				}
			}
			checkB1Digests(b, "kbld lock output", digests, len(refs))
			return d
		}},
	}

	times := make([][]time.Duration, len(sides))
	requests := make([]int, len(sides))
	var sampler *benchtable.Sampler
	for b.Loop() { // the ns/op is the whole interleaved run; the sides' times are the metrics
		sampler = benchtable.Start()
		for r := range rounds {
			for k := range sides {
				i := (k + r) % len(sides) // the order turns each round
				proxy.ResetStats()
				times[i] = append(times[i], sides[i].run())
				requests[i] = proxy.Requests()
			}
		}
	}
	med := make([]time.Duration, len(sides))
	for i := range sides {
		med[i] = medianDur(times[i])
	}
	pinTime, craneTime, kbldTime := med[0], med[1], med[2]
	ideal := time.Duration(math.Ceil(float64(len(refs))/concurrency)) * latency
	xIdeal := pinTime.Seconds() / ideal.Seconds()
	kbldX := kbldTime.Seconds() / pinTime.Seconds()
	craneX := craneTime.Seconds() / pinTime.Seconds()

	b.ReportMetric(pinTime.Seconds(), "slipway-s")
	b.ReportMetric(craneTime.Seconds(), "xargs-crane-s")
	b.ReportMetric(kbldTime.Seconds(), "kbld-s")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(xIdeal, "x-ideal")
	b.ReportMetric(kbldX, "kbld/slipway")
	b.ReportMetric(craneX, "crane/slipway")
	fmt.Printf("B1: %d refs in %d files, %v per request, concurrency %d on every side, %d rounds interleaved (medians)\n", len(refs), files, latency, concurrency, rounds)
	for i, s := range sides {
		fmt.Printf("B1: %-28s %8.3fs  runs %v  requests %d\n", s.name, med[i].Seconds(), roundMs(times[i]), requests[i])
	}
	fmt.Printf("B1: ideal                        %8.3fs\n", ideal.Seconds())
	fmt.Printf("B1: slipway at %.2fx the ideal (target <= 1.25x: %s); kbld %.2fx slipway's time (target >= 5x: %s); xargs crane %.2fx\n",
		xIdeal, metWord(xIdeal <= 1.25), kbldX, metWord(kbldX >= 5), craneX)

	what := fmt.Sprintf("pin %d refs in %d files, +20 ms/request, concurrency 16", len(refs), files)
	if os.Getenv("BENCH_SMOKE") != "" {
		what = "smoke: " + what
	}
	slip := fmt.Sprintf("%.2f s", pinTime.Seconds())
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B1 ideal", What: what, Slipway: slip,
		Peer: fmt.Sprintf("ideal ceil(n/16) x 20 ms %.2f s", ideal.Seconds()), Ratio: xIdeal, Target: "<= 1.25x ideal", Met: xIdeal <= 1.25}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B1 kbld", What: what, Slipway: slip,
		Peer: fmt.Sprintf("kbld --build-concurrency 16 %.2f s", kbldTime.Seconds()), Ratio: pinTime.Seconds() / kbldTime.Seconds(), Target: "<= 0.2x kbld (5x faster)", Met: kbldX >= 5}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B1 crane", What: what, Slipway: slip,
		Peer: fmt.Sprintf("xargs -P16 crane digest %.2f s", craneTime.Seconds()), Ratio: pinTime.Seconds() / craneTime.Seconds()}))
}

// checkB1Digests fails unless a peer printed one distinct sha256 digest per
// reference (the images are distinct, so are their digests).
func checkB1Digests(b *testing.B, who string, digests []string, want int) {
	b.Helper()
	seen := map[string]bool{}
	for _, d := range digests {
		if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
			b.Fatalf("%s: %q is not a digest", who, d)
		}
		seen[d] = true
	}
	if len(digests) != want || len(seen) != want {
		b.Fatalf("%s: %d digests, %d distinct, want %d (one per reference)", who, len(digests), len(seen), want)
	}
}

func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundMs(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%.2fs", d.Seconds()))
	}
	return out
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
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
