package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/pin"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
)

func main() {
	op := flag.String("op", "lint", "lint (Find and Lint) or pin (Find and Plan)")
	n := flag.Int("n", 1, "timed operations")
	warmup := flag.Int("warmup", 1, "operations run first and not timed")
	out := flag.String("out", "", "write what the last operation found to this file")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the timed operations to this file")
	flag.Parse()
	if flag.NArg() != 1 || (*op != "lint" && *op != "pin") || *n < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "usage: pintree -op lint|pin [-n N] [-warmup N] [-out FILE] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	ctx := context.Background()
	for range *warmup {
		if _, err := once(ctx, *op, dir); err != nil {
			fail(err)
		}
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer f.Close()
	}
	// Only Find and Lint or Plan are timed; what they found is counted and
	// written after. Nothing of one operation is kept during the next.
	var last result
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu, start := cpuTime(), time.Now()
	for range *n {
		last = result{}
		r, err := once(ctx, *op, dir)
		if err != nil {
			fail(err)
		}
		last = r
	}
	wall, used := time.Since(start), cpuTime()-cpu
	pprof.StopCPUProfile()
	runtime.ReadMemStats(&m1)
	lines, changed := last.lines(dir)
	fmt.Printf("files=%d sites=%d found=%d changed=%d ops=%d cpu-ns/op=%d wall-ns/op=%d alloc-B/op=%d allocs/op=%d gc/op=%.1f\n",
		len(last.tree.Files), len(last.tree.Sites()), len(lines), changed, *n, used/int64(*n), wall.Nanoseconds()/int64(*n),
		(m1.TotalAlloc-m0.TotalAlloc)/uint64(*n), (m1.Mallocs-m0.Mallocs)/uint64(*n), float64(m1.NumGC-m0.NumGC)/float64(*n))
	if *out != "" {
		slices.Sort(lines)
		if err := os.WriteFile(*out, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			fail(err)
		}
	}
}

// result is what one operation returned.
type result struct {
	tree     *pin.Tree
	findings []pin.Finding // lint
	plan     *pin.Result   // pin
}

func once(ctx context.Context, op, dir string) (result, error) {
	tree, err := pin.Find(ctx, []string{dir})
	if err != nil {
		return result{}, err
	}
	if op == "lint" {
		return result{tree: tree, findings: pin.Lint(tree)}, nil
	}
	res, err := pin.Plan(ctx, tree, digestOfName())
	if err != nil {
		return result{}, err
	}
	return result{tree: tree, plan: res}, nil
}

// lines is a line per finding (lint) or per change (pin), and the files
// pin changes.
func (r result) lines(dir string) (lines []string, changed int) {
	for _, f := range r.findings {
		lines = append(lines, fmt.Sprintf("%s:%d:%d %s", rel(dir, f.File), f.Line, f.Col, f.Ref))
	}
	if r.plan == nil {
		return lines, 0
	}
	for _, f := range r.plan.Files {
		if f.Status == pin.Changed {
			changed++
		}
		for _, c := range f.Changes {
			lines = append(lines, fmt.Sprintf("%s:%d:%d %s %s", rel(dir, c.File), c.Line, c.Col, c.From, c.To))
		}
	}
	return lines, changed
}

func rel(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil {
		return r
	}
	return path
}

// digestOfName answers every tag with a digest derived from the reference,
// without a registry: the same answer on both sides.
func digestOfName() resolve.Resolver {
	return resolve.Func(func(ctx context.Context, r ref.Reference) (ref.Pin, error) {
		sum := sha256.Sum256([]byte(r.Canonical()))
		return ref.PinOf(r, "sha256:"+hex.EncodeToString(sum[:]), ref.Origin{Source: ref.SourceRegistry}), nil
	})
}

// cpuTime is the user and system CPU time of the process so far, in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pintree:", err)
	os.Exit(1)
}
