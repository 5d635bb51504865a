package render_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/testharness/benchtable"

	"github.com/slipway-dev/slipway/testharness/need"
)

// BenchmarkB13aRender is benchmark B13a: render and verify a pool of 20
// generations (every image signed, in the in-process registry; verified
// against the tree's policy) beside `kustomize build` by the CLI ($KUSTOMIZE,
// make bench sets it) of the same kustomize input (the pool's
// kustomization with the generated objects, as render hands it to krusty,
// written to disk), in one run. It reports render with a cold
// verification cache (every signature checked against the registry), with
// a warm one (the Argo CD plugin's steady state), and kustomize's time, and
// the ratios. Target: render/kustomize within 1.5x. BENCH_SMOKE=1 renders 4
// generations.
func BenchmarkB13aRender(b *testing.B) {
	sampler := benchtable.Start()
	kustomize := need.Env(b, "KUSTOMIZE", "set it to the kustomize CLI (make bench does)")
	n := 20
	if os.Getenv("BENCH_SMOKE") != "" {
		n = 4
	}
	w := newWorld(b)
	f := files{}
	w.policy(f)
	f[pool.KustomizationFile("agents")] = kustomization
	f["pools/agents/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: sandboxes\n"
	f["pools/agents/config.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: agents-settings\ndata:\n  level: info\n"
	var gens []*generation.Generation
	var states []string
	for i := range n {
		gens = append(gens, gen(b, "agents", i+1,
			w.image(b, "platform/control-plane", fmt.Sprint("cp", i), w.release),
			w.image(b, "platform/runner", fmt.Sprint("runner", i), w.release),
			w.image(b, "templates/tools", fmt.Sprint("tools", i), w.release)))
		states = append(states, map[bool]string{true: pool.Retained, false: pool.Draining}[i < n-3])
	}
	states[n-2], states[n-1] = pool.Active, pool.Warming
	addPool(b, f, "agents", "  kubernetes:\n    nodeImageLabel: slipway.dev/node-image\n", gens, states)
	tree, rev, _ := commit(b, f)
	ctx := context.Background()

	// The same kustomize input, on disk, for the CLI.
	input := b.TempDir()
	var inputDir string
	dump := render.WithInputHook(func(fsys filesys.FileSystem, dir string) {
		inputDir = filepath.Join(input, dir)
		_ = fsys.Walk("/", func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := fsys.ReadFile(p)
			if err != nil {
				return err
			}
			dst := filepath.Join(input, p)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dst, data, 0o644)
		})
	})
	first, err := render.Pool(ctx, tree, "agents", rev, dump)
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(kustomize, "build", inputDir).Output()
	if err != nil {
		b.Fatalf("kustomize build: %v", err)
	}
	if got, want := bytes.Count(out, []byte("kind: SandboxTemplate")), bytes.Count(first.YAML, []byte("kind: SandboxTemplate")); got != n || want != n {
		b.Fatalf("templates: kustomize %d, render %d, want %d", got, want, n)
	}

	timed := func(f func()) time.Duration {
		b.StartTimer()
		start := time.Now()
		f()
		d := time.Since(start)
		b.StopTimer()
		return d
	}
	var cold, warm, kust time.Duration
	for b.Loop() {
		b.StopTimer()
		cache := policy.NewCache()
		cold = timed(func() {
			if _, err := render.Pool(ctx, tree, "agents", rev, render.WithVerifyCache(cache)); err != nil {
				b.Fatal(err)
			}
		})
		warm = timed(func() {
			if _, err := render.Pool(ctx, tree, "agents", rev, render.WithVerifyCache(cache)); err != nil {
				b.Fatal(err)
			}
		})
		if h, m := cache.Stats(); h != 3*n || m != 3*n {
			b.Fatalf("cache: %d hits, %d misses, want %d each", h, m, 3*n)
		}
		kust = timed(func() {
			if err := exec.Command(kustomize, "build", inputDir).Run(); err != nil {
				b.Fatal(err)
			}
		})
		b.StartTimer()
	}
	b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
	b.ReportMetric(float64(warm.Milliseconds()), "warm-ms")
	b.ReportMetric(float64(kust.Milliseconds()), "kustomize-ms")
	b.ReportMetric(float64(warm)/float64(kust), "warm/kustomize")
	b.ReportMetric(float64(cold)/float64(kust), "cold/kustomize")
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B13a", What: smoke + "render and verify a pool's generations beside kustomize build",
		Slipway: fmt.Sprintf("warm %d ms, cold %d ms", warm.Milliseconds(), cold.Milliseconds()), Peer: fmt.Sprintf("kustomize build %d ms", kust.Milliseconds()),
		Ratio: float64(warm) / float64(kust), Target: "<= 1.5x warm", Met: float64(warm)/float64(kust) <= 1.5}))
	fmt.Fprintf(os.Stderr, "B13a: %d generations (%d signed images): render+verify cold cache %v, warm cache %v; kustomize build (CLI) %v; warm/kustomize %.2fx (target 1.5x), cold/kustomize %.2fx\n",
		n, 3*n, cold.Round(time.Millisecond), warm.Round(time.Millisecond), kust.Round(time.Millisecond),
		float64(warm)/float64(kust), float64(cold)/float64(kust))
}
