package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/testharness/mixedtree"
)

// BenchmarkMixedTree times lint (Find and Lint) and pin (Find and Plan, the
// dry run of `slipway pin`) over a generated tree of 10,000 YAML files of
// mixed kinds: built-in workloads, kustomizations, objects without images,
// and the custom resources of agent-sandbox, Argo, Tekton, Knative, KEDA,
// Ray, Kubeflow, Flink and Spark. The tree comes from a fixed seed, about
// half its bytes random; the builtin- variants time a tree of built-in kinds
// only. BENCH_SMOKE=1 shrinks the trees to 200 files. Besides the
// time it reports cpu-ns/op, the CPU time of the process (all threads, the
// garbage collector's included) per operation: on a machine shared with
// other work it varies less than the time, and it shows work done on more
// than one core.
func BenchmarkMixedTree(b *testing.B) {
	files := 10_000
	if os.Getenv("BENCH_SMOKE") != "" {
		files = 200
	}
	ctx := context.Background()
	for _, tree := range []struct {
		name string
		docs []string
	}{
		// Every kind; then, as a control, only the built-in workloads and
		// objects without images, where the code before the known kinds and
		// the shape rules found every reference too.
		{"", mixedtree.Docs},
		{"builtin-", mixedtree.Docs[:mixedtree.BuiltinDocs]},
	} {
		dir := b.TempDir()
		if err := mixedtree.Write(dir, files, 42, tree.docs); err != nil {
			b.Fatal(err)
		}
		b.Run(tree.name+"lint", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				tree, err := Find(ctx, []string{dir})
				if err != nil {
					b.Fatal(err)
				}
				Lint(tree)
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(tree.name+"pin", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				tree, err := Find(ctx, []string{dir})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Plan(ctx, tree, digestOfName()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// digestOfName answers every tag with a digest derived from the reference.
func digestOfName() resolve.Resolver {
	return resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		sum := sha256.Sum256([]byte(r.Canonical()))
		return ref.PinOf(r, "sha256:"+hex.EncodeToString(sum[:]), ref.Origin{Source: ref.SourceRegistry}), nil
	})
}
