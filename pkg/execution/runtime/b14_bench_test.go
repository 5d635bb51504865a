package runtime_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// fullRounds is how many full checkpoints (and floors) B14 takes: their
// medians are its figures.
const fullRounds = 3

// BenchmarkB14CheckpointSuspendResume is benchmark B14: a run's workspace
// of 100 MB of mixed files (a fixed seed; about half the bytes random,
// half text) is checkpointed whole (three times, each a new run's
// workspace written afresh: the medians are the full figures, beside the
// floor's), then 20 cycles each change 1 MB of it
// from the host, checkpoint it incrementally, suspend the run (sandbox
// deleted) and resume it (a new bubblewrap sandbox, the checkpoint
// verified and restored, one command run in it: runnable), and compare
// every file's hash with what was written: none may be lost or wrong.
// The floor beside it, in the same run: the same workspace as `tar` plus
// crane's append (a gzip tar layer appended to an empty image, written to
// an OCI layout), once per cycle.
//
//	go test -run '^$' -bench B14 -benchtime 1x ./pkg/execution/runtime/
//	BENCH_SMOKE=1 go test -run '^$' -bench B14 -benchtime 1x ./pkg/execution/runtime/   # 8 MB, 3 cycles
func BenchmarkB14CheckpointSuspendResume(b *testing.B) {
	size, cycles, change := int64(100<<20), 20, int64(1<<20)
	if os.Getenv("BENCH_SMOKE") != "" {
		size, cycles = 8<<20, 3
	}
	w := newWarmWorld(b)
	g := w.generation(b, nil)
	f := newCkptRig(b, w.desired(b, "rev-1", 0, g))
	ctx := context.Background()
	sampler := benchtable.Start()
	for range b.N {
		// The full checkpoint, and the floor beside it, three times (each
		// of a new run's workspace, written afresh: a run's first
		// checkpoint is whole); the medians are the figures. The last
		// run goes on into the cycles.
		var (
			gr                  *runtimeapi.Grant
			ws                  string
			files               []string
			rng                 *rand.Rand
			fulls, floorFulls   []time.Duration
			fullCPUs, floorCPUs []time.Duration
		)
		for round := range fullRounds {
			var err error
			if gr != nil {
				if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
					b.Fatal(err)
				}
			}
			if gr, err = f.rt.Claim(ctx, runtime.ClaimRequest{Pool: "agents", Tenant: "acme"}); err != nil {
				b.Fatal(err)
			}
			if ws, err = f.be.WorkspaceDir(ctx, gr.SandboxID); err != nil {
				b.Fatal(err)
			}
			rng = rand.New(rand.NewPCG(14, uint64(14+round)))
			files = writeMixedTree(b, rng, ws, size)
			// the tree's own writing is not the checkpoint's: its pages
			// written back before either side reads it
			syscall.Sync()
			start, cpu0 := time.Now(), cpuTime()
			if _, err := f.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token}); err != nil {
				b.Fatal(err)
			}
			fulls, fullCPUs = append(fulls, time.Since(start)), append(fullCPUs, cpuTime()-cpu0)
			syscall.Sync()
			cpu1 := cpuTime()
			floorFulls = append(floorFulls, tarCraneAppend(b, ws))
			floorCPUs = append(floorCPUs, cpuTime()-cpu1)
		}
		median := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
		full, fullCPU, floorFull, floorCPU := median(fulls), median(fullCPUs), median(floorFulls), median(floorCPUs)

		var inc, resume, floors []time.Duration
		lost := 0
		for c := range cycles {
			changeFiles(b, rng, ws, files, change, c)
			want := hashDir(b, ws)
			t0 := time.Now()
			if _, err := f.rt.Checkpoint(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: int64(c)}); err != nil {
				b.Fatal(err)
			}
			inc = append(inc, time.Since(t0))
			floors = append(floors, tarCraneAppend(b, ws))
			if _, err := f.rt.Suspend(ctx, gr.RunID, runtime.CheckpointRequest{Token: gr.Token, EventSeq: int64(c)}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			ng, err := f.rt.Resume(ctx, gr.RunID, gr.Token)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.rt.Exec(ctx, ng.RunID, ng.Token, execReq("true"), &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
				b.Fatal(err)
			}
			resume = append(resume, time.Since(t1))
			gr = ng
			if ws, err = f.be.WorkspaceDir(ctx, gr.SandboxID); err != nil {
				b.Fatal(err)
			}
			got := hashDir(b, ws)
			for k, v := range want {
				if got[k] != v {
					lost++
					b.Errorf("cycle %d: %s lost or wrong after resume", c, k)
				}
			}
			if len(got) != len(want) {
				b.Errorf("cycle %d: %d files after resume, %d before", c, len(got), len(want))
			}
		}
		if err := f.rt.Release(ctx, gr.RunID, gr.Token, nil); err != nil {
			b.Fatal(err)
		}
		p50 := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
		fullPerGB := full.Seconds() * float64(1<<30) / float64(size)
		floorPerGB := floorFull.Seconds() * float64(1<<30) / float64(size)
		b.ReportMetric(fullPerGB, "full-s/GB")
		b.ReportMetric(p50(inc).Seconds(), "inc-p50-s")
		b.ReportMetric(p50(resume).Seconds(), "resume-p50-s")
		b.ReportMetric(float64(lost), "lost")
		b.ReportMetric(floorPerGB, "tar+crane-s/GB")
		perGB := func(d time.Duration) float64 { return d.Seconds() * float64(1<<30) / float64(size) }
		b.ReportMetric(perGB(fullCPU), "full-cpu-s/GB")
		b.Logf("B14: %d MB, %d cycles: full checkpoint %s (%.2f s/GB; tar+crane append %s, %.2f s/GB); incremental after 1 MB p50 %s (tar+crane of the whole p50 %s); resume to runnable p50 %s; lost %d",
			size>>20, cycles, full.Round(time.Millisecond), fullPerGB, floorFull.Round(time.Millisecond), floorPerGB,
			p50(inc).Round(time.Millisecond), p50(floors).Round(time.Millisecond), p50(resume).Round(time.Millisecond), lost)
		b.Logf("B14: CPU time (user and system, the process and its children) of the full checkpoint %s (%.2f s/GB), of tar + crane append %s (%.2f s/GB)",
			fullCPU.Round(time.Millisecond), perGB(fullCPU), floorCPU.Round(time.Millisecond), perGB(floorCPU))
		met := lost == 0 && p50(resume) < time.Second && p50(inc) < 250*time.Millisecond && fullPerGB < 1
		benchtable.Emit(b, sampler.Finish(benchtable.Row{
			Bench: "B14", What: fmt.Sprintf("checkpoint/suspend/resume, %d MB workspace, %d cycles of 1 MB changed", size>>20, cycles),
			Slipway:  fmt.Sprintf("full %.2f s/GB; incremental p50 %s; resume p50 %s; lost %d", fullPerGB, p50(inc).Round(time.Millisecond), p50(resume).Round(time.Millisecond), lost),
			Peer:     fmt.Sprintf("tar + crane append %.2f s/GB (incremental: whole again, p50 %s)", floorPerGB, p50(floors).Round(time.Millisecond)),
			Ratio:    fullPerGB / floorPerGB,
			Target:   "0 lost; resume p50 < 1 s; incremental < 0.25 s; full < 1 s/GB",
			Met:      met,
			Settings: "Slipway: uncompressed tar layers (one sha256, linked into the store); floor: GNU tar, crane.Append (gzip default), OCI layout; resume includes a new sandbox and one command",
		}))
	}
}

// writeMixedTree writes about size bytes under dir: files of 1 KB to 1 MB
// in nested directories, about half random bytes and half repetitive text.
func writeMixedTree(tb testing.TB, rng *rand.Rand, dir string, size int64) []string {
	tb.Helper()
	var files []string
	var total int64
	for i := 0; total < size; i++ {
		n := int64(1<<10) << rng.IntN(11) // 1 KB .. 1 MB
		p := filepath.Join(dir, fmt.Sprintf("d%02d/s%02d/f%05d", i%16, (i/16)%8, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, content(rng, n, i%2 == 0), 0o644); err != nil {
			tb.Fatal(err)
		}
		files = append(files, p)
		total += n
	}
	return files
}

func content(rng *rand.Rand, n int64, random bool) []byte {
	b := make([]byte, n)
	if random {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	line := []byte(fmt.Sprintf("line of text %d for a workspace file\n", rng.IntN(1000)))
	for i := range b {
		b[i] = line[i%len(line)]
	}
	return b
}

// changeFiles rewrites files worth about change bytes, deletes one and adds one.
func changeFiles(tb testing.TB, rng *rand.Rand, dir string, files []string, change int64, cycle int) {
	tb.Helper()
	var done int64
	for done < change {
		p := files[rng.IntN(len(files))]
		n := int64(64 << 10)
		if err := os.WriteFile(p, content(rng, n, true), 0o644); err != nil && !os.IsNotExist(err) {
			tb.Fatal(err)
		}
		done += n
	}
	_ = os.Remove(files[rng.IntN(len(files))])
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("new-%02d", cycle)), content(rng, 4096, false), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func hashDir(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// cpuTime is the CPU time (user and system) of this process and of its
// children waited for: what a quiet machine's wall clock would be at most,
// on one core.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// tarCraneAppend is the floor: `tar` of the workspace, crane's Append of
// that tarball onto an empty image, written to a fresh OCI layout.
func tarCraneAppend(tb testing.TB, dir string) time.Duration {
	tb.Helper()
	tmp := tb.TempDir()
	start := time.Now()
	tarball := filepath.Join(tmp, "ws.tar")
	if out, err := exec.Command("tar", "-C", dir, "-cf", tarball, ".").CombinedOutput(); err != nil {
		tb.Fatalf("tar: %v: %s", err, out)
	}
	img, err := crane.Append(empty.Image, tarball)
	if err != nil {
		tb.Fatal(err)
	}
	lp, err := layout.Write(filepath.Join(tmp, "layout"), empty.Index)
	if err != nil {
		tb.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start)
}
