package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/testharness/benchtable"
)

// b7Params fixes the synthetic data set; every figure is in the cache key.
type b7Params struct {
	Runs, Templates, Runners, Generations int
	PackagePool, PerTemplate              int
	Seed                                  uint64
}

// b7GeneratorVersion changes whenever b7World makes different data, so a
// cached database of older data is not reused.
const b7GeneratorVersion = 1

// BenchmarkB7Queries (issue 6, B7): 1,000,000 synthetic run manifests in the
// SQLite store; the time of "runs that used template X" and "runs whose
// template contains package P@V", each as Query returns it (all matching run
// ids, sorted). Target: under 100 ms each. It prints lines starting "B7".
//
// The data comes from a fixed seed: 2,000 workspace templates, 50 runners,
// 4,000 generations (each pins a template, a runner, a node image, a policy
// revision, ...), each template holding 200 packages drawn from 5,000
// name@versions, so a template has about 500 runs and a package is in about
// 80 templates, about 40,000 runs. The database is built once (bulk load
// through the same insert code as Create, 100,000 manifests a transaction)
// and cached in $SLIPWAY_BENCH_CACHE or ~/.cache/slipway-bench/b7/, keyed by
// the parameters, the generator version, the schema version and a hash of
// the schema and page size; a cached file whose schema version, run count
// or template count does not match is rebuilt, and stale files of the same
// size are removed.
//
//	go test -run '^$' -bench B7 -benchtime 1x -timeout 60m ./pkg/execution/runs/              # full
//	BENCH_SMOKE=1 go test -run '^$' -bench B7 -benchtime 1x ./pkg/execution/runs/            # seconds
func BenchmarkB7Queries(b *testing.B) {
	sampler := benchtable.Start()
	p := b7Params{Runs: 1_000_000, Templates: 2000, Runners: 50, Generations: 4000, PackagePool: 5000, PerTemplate: 200, Seed: 7}
	if os.Getenv("BENCH_SMOKE") != "" {
		p.Runs, p.Templates, p.Generations = 10_000, 200, 400
	}
	const target = 100 * time.Millisecond
	ctx := context.Background()
	w := newB7World(p)
	path, built, buildTime := b7Database(b, w)
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}

	// what the answers must be, from the generator alone
	perTemplate := w.runsPerTemplate()
	rng := rand.New(rand.NewPCG(p.Seed, 0xb7))
	const targets, repeats = 5, 5
	var templates []int
	var pkgs []string
	for len(templates) < targets {
		if t := rng.IntN(p.Templates); perTemplate[t] > 0 {
			templates = append(templates, t)
		}
	}
	for len(pkgs) < targets {
		pkgs = append(pkgs, w.packages[rng.IntN(len(w.packages))])
	}
	wantPkg := make([]int, len(pkgs))
	for k, pkg := range pkgs {
		for t, ps := range w.templatePackages {
			if slices.Contains(ps, pkg) {
				wantPkg[k] += perTemplate[t]
			}
		}
	}

	type sample struct {
		d    time.Duration
		rows int
	}
	run := func(q runmanifest.Query, want int) sample {
		start := time.Now()
		ids, err := s.Query(ctx, q)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) != want {
			b.Fatalf("B7: Query(%+v) returned %d run ids, the generator made %d", q, len(ids), want)
		}
		return sample{d, len(ids)}
	}
	var byTemplate, byPackage []sample
	var firstTemplate, firstPackage time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range repeats {
			for _, t := range templates {
				sm := run(runmanifest.Query{Template: w.templates[t]}, perTemplate[t])
				if i == 0 && firstTemplate == 0 {
					firstTemplate = sm.d
				}
				byTemplate = append(byTemplate, sm)
			}
			for k, pkg := range pkgs {
				sm := run(runmanifest.Query{Package: pkg}, wantPkg[k])
				if i == 0 && firstPackage == 0 {
					firstPackage = sm.d
				}
				byPackage = append(byPackage, sm)
			}
		}
	}
	b.StopTimer()

	how := "cached"
	if built {
		how = fmt.Sprintf("built in %s", buildTime.Round(time.Millisecond))
	}
	fmt.Printf("B7: %d manifests (%d templates, %d runners, %d generations; %d packages per template from %d name@versions), "+
		"SQLite file %.1f MB, %s: %s\n", p.Runs, p.Templates, p.Runners, p.Generations, p.PerTemplate, p.PackagePool,
		float64(fi.Size())/1e6, how, path)
	report := func(name string, ss []sample, first time.Duration) time.Duration {
		ds := make([]time.Duration, len(ss))
		rows, minRows, maxRows := 0, ss[0].rows, ss[0].rows
		for i, sm := range ss {
			ds[i] = sm.d
			rows += sm.rows
			minRows, maxRows = min(minRows, sm.rows), max(maxRows, sm.rows)
		}
		slices.Sort(ds)
		med := ds[len(ds)/2]
		fmt.Printf("B7: %-45s median %8.3f ms over %d queries (%d targets x %d), min %.3f ms, max %.3f ms, first %.3f ms; "+
			"%d run ids per query on average (%d..%d) -- target < %v: %s\n",
			name, ms(med), len(ds), targets, len(ds)/targets, ms(ds[0]), ms(ds[len(ds)-1]), ms(first),
			rows/len(ss), minRows, maxRows, target, verdict(med < target))
		return med
	}
	medT := report("runs that used template X:", byTemplate, firstTemplate)
	medP := report("runs whose template contains package P@V:", byPackage, firstPackage)
	b.ReportMetric(ms(medT), "template-ms")
	b.ReportMetric(ms(medP), "package-ms")
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B7", What: smoke + "queries over the run manifests (\"runs whose template contains P@V\")",
		Slipway: fmt.Sprintf("template X %.2f ms, package P@V %.1f ms (medians)", ms(medT), ms(medP)), NoPeer: true, Target: "< 100 ms", Met: ms(medP) < 100 && ms(medT) < 100}))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// b7World is the synthetic fleet: artifacts, generations pinning them, and
// the packages of each template. Run i's details come from a generator
// seeded with (Seed, i), so any run can be made (or just its generation
// drawn) without making the others.
type b7World struct {
	p                b7Params
	templates        []string
	packages         []string   // name@version
	templatePackages [][]string // per template
	gens             []b7Gen
	pools            []string
}

type b7Gen struct {
	id, pool                                                   string
	template                                                   int
	runner, nodeImage, policy, controlPlane, model, prompt, rc string
}

func newB7World(p b7Params) *b7World {
	r := rand.New(rand.NewPCG(p.Seed, 1))
	digest := func() string {
		var b [32]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return "sha256:" + hex.EncodeToString(b[:])
	}
	hexN := func(n int) string { return digest()[7 : 7+n] }
	many := func(n int, f func() string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f()
		}
		return out
	}
	w := &b7World{p: p}
	w.templates = many(p.Templates, digest)
	runners := many(p.Runners, digest)
	nodeImages := many(20, func() string { return "ami-" + hexN(17) })
	policies := many(40, func() string { return hexN(40) })
	controlPlanes := many(10, digest)
	models := many(8, func() string { return "model-" + hexN(8) })
	prompts := many(30, digest)
	w.pools = many(10, func() string { return "pool-" + hexN(6) })
	// package names as SBOMs have them (distribution packages, modules),
	// two or three versions each, all distinct
	seen := map[string]bool{}
	for len(w.packages) < p.PackagePool {
		name := []string{"lib", "py-", "go-", "node-", ""}[r.IntN(5)] + hexN(6+r.IntN(6))
		for range 2 + r.IntN(2) {
			pv := fmt.Sprintf("%s@%d.%d.%d-%d", name, r.IntN(4), r.IntN(30), r.IntN(20), r.IntN(3))
			if !seen[pv] && len(w.packages) < p.PackagePool {
				seen[pv] = true
				w.packages = append(w.packages, pv)
			}
		}
	}
	w.templatePackages = make([][]string, p.Templates)
	for t := range w.templatePackages {
		idx := r.Perm(len(w.packages))[:p.PerTemplate]
		ps := make([]string, len(idx))
		for i, k := range idx {
			ps[i] = w.packages[k]
		}
		w.templatePackages[t] = ps
	}
	w.gens = make([]b7Gen, p.Generations)
	for i := range w.gens {
		w.gens[i] = b7Gen{
			id: "g-" + hexN(64), pool: w.pools[r.IntN(len(w.pools))], template: i % p.Templates,
			runner: runners[r.IntN(len(runners))], nodeImage: nodeImages[r.IntN(len(nodeImages))],
			policy: policies[r.IntN(len(policies))], controlPlane: controlPlanes[r.IntN(len(controlPlanes))],
			model: models[r.IntN(len(models))], prompt: prompts[r.IntN(len(prompts))],
			rc: []string{"bwrap", "gvisor", "kata"}[r.IntN(3)],
		}
	}
	return w
}

func (w *b7World) runRand(i int) *rand.Rand { return rand.New(rand.NewPCG(w.p.Seed, uint64(i)+2)) }

func (w *b7World) runsPerTemplate() []int {
	n := make([]int, w.p.Templates)
	for i := range w.p.Runs {
		n[w.gens[w.runRand(i).IntN(len(w.gens))].template]++
	}
	return n
}

// manifest makes run i: about half its bytes are random ids and digests.
func (w *b7World) manifest(i int) *runmanifest.Manifest {
	r := w.runRand(i)
	g := &w.gens[r.IntN(len(w.gens))] // first draw: runsPerTemplate repeats it
	hexN := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for k := range b {
			b[k] = digits[r.IntN(16)]
		}
		return string(b)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 250 * time.Millisecond)
	at := time.Duration(0)
	next := func(maxMs int) time.Time {
		at += time.Duration(1+r.IntN(maxMs*1000)) * time.Microsecond
		return t0.Add(at)
	}
	m := &runmanifest.Manifest{
		RunID:             fmt.Sprintf("r-%012x-%s", t0.UnixMilli(), hexN(8)), // time-ordered, like a ULID
		SessionID:         "s-" + hexN(16),
		AllocationAttempt: 1 + r.IntN(2),
		SandboxID:         "sb-" + hexN(12),
		Cluster:           "local",
		Namespace:         "tenant-" + hexN(4),
		NodeID:            fmt.Sprintf("node-%02d", r.IntN(64)),
		NodeImageID:       g.nodeImage, RuntimeClass: g.rc, ControlPlaneDigest: g.controlPlane, RunnerImageDigest: g.runner,
		WorkspaceTemplateID: w.templates[g.template],
		PolicyRevision:      g.policy, ModelID: g.model, PromptBundleID: g.prompt,
		Generation: g.id, Pool: g.pool, Tenant: "t-" + hexN(4), Warm: r.IntN(10) != 0,
		ConfigRevision: hexN(40),
	}
	if r.IntN(8) == 0 {
		m.WorkspaceCheckpointID = "sha256:" + hexN(64)
	}
	l := &m.Lifecycle
	l.RequestReceived, l.AdmissionAccepted, l.ClaimCreated = next(2), next(2), next(2)
	l.SandboxAssigned, l.Ready, l.RunnerAwakened = next(5), next(200), next(5)
	l.FirstOutput, l.ResultPublished, l.ResourcesReleased = next(2000), next(600000), next(500)
	for range 1 + r.IntN(2) {
		issued := l.Ready
		m.CredentialIssuances = append(m.CredentialIssuances, runmanifest.Receipt{
			Issuer: "local-broker", SecretVersion: fmt.Sprintf("secret-%02d/%d", r.IntN(20), 1+r.IntN(9)),
			SHA256Fingerprint: "sha256:" + hexN(64), IssuedAt: issued, ExpiresAt: issued.Add(time.Hour),
		})
	}
	exit := 0
	switch k := r.IntN(20); {
	case k == 0:
		m.Status, exit = runmanifest.StatusFailed, 1+r.IntN(127)
	case k == 1:
		m.Status = runmanifest.StatusReleased
	default:
		m.Status = runmanifest.StatusCompleted
	}
	if m.Status != runmanifest.StatusReleased {
		m.ExitCode = &exit
	}
	return m
}

// b7Database returns the cached database of w, building it if it is
// missing or does not match.
func b7Database(b *testing.B, w *b7World) (path string, built bool, took time.Duration) {
	b.Helper()
	ctx := context.Background()
	dir := filepath.Join(b7CacheDir(), "b7")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sh := sha256.Sum256(fmt.Appendf(nil, "%s;page_size=%d", strings.Join(schema, ";"), pageSize))
	p := w.p
	name := fmt.Sprintf("runs-v%d-%x-gen%d-n%d-t%d-r%d-g%d-p%d-k%d-seed%d.db", SchemaVersion, sh[:4], b7GeneratorVersion,
		p.Runs, p.Templates, p.Runners, p.Generations, p.PackagePool, p.PerTemplate, p.Seed)
	path = filepath.Join(dir, name)
	if err := b7Check(ctx, path, p); err == nil {
		return path, false, 0
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Printf("B7: rebuilding %s: %v\n", path, err)
	}
	// other cached B7 databases of this size are stale: a schema or generator change
	olds, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("runs-*-n%d-*.db*", p.Runs)))
	for _, old := range olds {
		os.Remove(old)
	}

	start := time.Now()
	tmp := path + ".tmp"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(f)
	}
	s, err := OpenSQLite(ctx, tmp)
	if err != nil {
		b.Fatal(err)
	}
	// a bulk load of a throw-away file: a bigger page cache for the index
	// inserts, and no fsync (the file is renamed into place only when done)
	for _, pragma := range []string{"PRAGMA cache_size = -524288", "PRAGMA synchronous = OFF"} {
		if _, err := s.w.ExecContext(ctx, pragma); err != nil {
			b.Fatal(err)
		}
	}
	for t, id := range w.templates {
		ps := make([]runmanifest.Package, len(w.templatePackages[t]))
		for i, pv := range w.templatePackages[t] {
			if ps[i], err = runmanifest.ParsePackage(pv); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.RecordPackages(ctx, id, ps); err != nil {
			b.Fatal(err)
		}
	}
	const chunk = 100_000
	for lo := 0; lo < p.Runs; lo += chunk {
		hi := min(lo+chunk, p.Runs)
		var seq iter.Seq[*runmanifest.Manifest] = func(yield func(*runmanifest.Manifest) bool) {
			for i := lo; i < hi; i++ {
				if !yield(w.manifest(i)) {
					return
				}
			}
		}
		if _, err := s.createAll(ctx, seq); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	took = time.Since(start)
	if err := b7Check(ctx, path, p); err != nil {
		b.Fatal(err)
	}
	return path, true, took
}

// b7Check opens a cached database and checks that it has this schema
// version and the expected numbers of runs and templates.
func b7Check(ctx context.Context, path string, p b7Params) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		return err
	}
	defer s.Close()
	var runs, templates int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT max(id) FROM runs), (SELECT count(*) FROM templates)`).Scan(&runs, &templates); err != nil {
		return err
	}
	if runs != p.Runs || templates != p.Templates {
		return fmt.Errorf("%d runs and %d templates, want %d and %d", runs, templates, p.Runs, p.Templates)
	}
	return nil
}

func b7CacheDir() string {
	if d := os.Getenv("SLIPWAY_BENCH_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "slipway-bench")
	}
	return filepath.Join(home, ".cache", "slipway-bench")
}
