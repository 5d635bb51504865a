package release_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/gittest"

	"github.com/slipway-dev/slipway/testharness/need"
)

// BenchmarkB5Promote is benchmark B5: promote into a generated config
// repository (10,000 files, 5,000 commits, from a fixed seed, about half
// the bytes random) served by git http-backend on 127.0.0.1, and do the same
// edit with the git CLI and kustomize, in one run:
//
//	(a) from nothing: `slipway promote` (a shallow clone in memory) against
//	    `git clone --depth 1` + `kustomize edit set image` + `git commit -a`
//	    + `git push`;
//	(b) from an existing clone: `slipway promote --cache-dir` (the cache
//	    filled by an untimed run at the previous head) against `git pull
//	    --ff-only` + kustomize + commit + push in a full clone made untimed
//	    before. One commit lands on the remote in between, so both fetch.
//
// Each measurement starts from its own copy of the same remote, so both
// tools edit the same head. Afterwards the remote's head must hold the new
// digests, sit directly on the old head, and pass git fsck. Slipway's commit
// is a superset of the git CLI's (the generation document and desired.yaml
// as well as the kustomization). Target: slipway/git <= 1.0 for (a) and (b).
//
// It runs the built binaries $SLIPWAY_BIN and $KUSTOMIZE (make bench sets
// both). The generated repository is cached under
// ~/.cache/slipway-bench/. BENCH_SMOKE=1 shrinks it to about 200 files and
// 50 commits.
func BenchmarkB5Promote(b *testing.B) {
	sampler := benchtable.Start()
	slipway, kustomize := need.Env(b, "SLIPWAY_BIN", "make bench sets it"), need.Env(b, "KUSTOMIZE", "make bench sets it")
	p := b5Params{Pools: 200, Generations: 10, PoolManifests: 27, Files: 10000, Commits: 5000, Seed: 5}
	if os.Getenv("BENCH_SMOKE") != "" {
		p = b5Params{Pools: 4, Generations: 5, PoolManifests: 32, Files: 200, Commits: 50, Seed: 5}
	}
	genStart := time.Now()
	cached, built := b5Repo(b, p)
	genTime := time.Since(genStart)
	target := fmt.Sprintf("pool-%04d", min(42, p.Pools/2))

	srv := gittest.NewServer(b)
	// newRemote copies the generated repository to a fresh name on the
	// server and returns its URL and folder.
	n := 0
	newRemote := func(what string) (string, string) {
		n++
		name := fmt.Sprintf("%s-%d.git", what, n)
		if out, err := exec.Command("cp", "-a", cached, srv.Dir(name)).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v\n%s", err, out)
		}
		return srv.URL(name), srv.Dir(name)
	}
	info := b5Describe(b, cached)

	// The new generation: the previous target with new runner and
	// workspace-template digests, made by the CLI (verification skipped:
	// the digests need not exist).
	work := b.TempDir()
	prevFile, runnerRepo, templateRepo := b5PreviousGeneration(b, cached, target, work)
	rng := rand.New(rand.NewPCG(p.Seed, 99))
	runner, template := runnerRepo+"@"+b5Digest(rng), templateRepo+"@"+b5Digest(rng)
	genFile := filepath.Join(work, "next.yaml")
	b5Run(b, "", slipway, "generation", "create", "--pool", target, "--from", prevFile,
		"--pin", "runner="+runner, "--pin", "workspaceTemplate="+template, "--insecure-skip-verify", "--out-file", genFile)
	images := []string{"slipway/runner=" + runner, "slipway/workspace-template=" + template}
	wantDigests := []string{runner[strings.Index(runner, "@")+1:], template[strings.Index(template, "@")+1:]}

	// timed runs f with the benchmark timer on and returns its wall time.
	timed := func(f func()) time.Duration {
		b.StartTimer()
		start := time.Now()
		f()
		d := time.Since(start)
		b.StopTimer()
		return d
	}
	var m b5Times
	for b.Loop() {
		b.StopTimer()
		m = b5Times{}
		// (a) from nothing.
		url, dir := newRemote("a-slipway")
		head := gittest.Git(b, dir, "rev-parse", "main")
		m.slipwayA = timed(func() {
			b5Run(b, "", slipway, "promote", "--repo", url, "--pool", target, "--generation", genFile, "--insecure-skip-verify")
		})
		b5Check(b, "(a) slipway", dir, head, target, wantDigests)
		m.slipwayFiles = b5Changed(b, dir)

		url, dir = newRemote("a-git")
		clone := filepath.Join(b.TempDir(), "clone")
		m.gitA.fetch = timed(func() { gittest.Git(b, "", "clone", "--quiet", "--depth", "1", url, clone) })
		m.gitA.edit, m.gitA.commit, m.gitA.push = b5GitEdit(b, timed, kustomize, clone, target, images)
		b5Check(b, "(a) git", dir, head, target, wantDigests)
		m.gitFiles = b5Changed(b, dir)

		// (b) from an existing clone: warm both, then one commit lands on
		// both remotes.
		sURL, sDir := newRemote("b-slipway")
		gURL, gDir := newRemote("b-git")
		cache := filepath.Join(b.TempDir(), "cache")
		b5Run(b, "", slipway, "generation", "show", b5GenID(b, prevFile), "--repo", sURL, "--pool", target, "--cache-dir", cache)
		clone = filepath.Join(b.TempDir(), "clone")
		gittest.Git(b, "", "clone", "--quiet", gURL, clone)
		head = b5OtherCommit(b, gURL, sURL)

		m.slipwayB = timed(func() {
			b5Run(b, "", slipway, "promote", "--repo", sURL, "--pool", target, "--generation", genFile, "--insecure-skip-verify", "--cache-dir", cache)
		})
		b5Check(b, "(b) slipway", sDir, head, target, wantDigests)

		m.gitB.fetch = timed(func() { gittest.Git(b, clone, "pull", "--quiet", "--ff-only") })
		m.gitB.edit, m.gitB.commit, m.gitB.push = b5GitEdit(b, timed, kustomize, clone, target, images)
		b5Check(b, "(b) git", gDir, head, target, wantDigests)
		b.StartTimer()
	}

	ra, rb := m.slipwayA.Seconds()/m.gitA.total().Seconds(), m.slipwayB.Seconds()/m.gitB.total().Seconds()
	b.ReportMetric(m.slipwayA.Seconds(), "slipway-a-s")
	b.ReportMetric(m.gitA.total().Seconds(), "git-a-s")
	b.ReportMetric(m.slipwayB.Seconds(), "slipway-b-s")
	b.ReportMetric(m.gitB.total().Seconds(), "git-b-s")
	b.ReportMetric(ra, "slipway/git-a")
	b.ReportMetric(rb, "slipway/git-b")
	how := "cached"
	if built {
		how = "generated"
	}
	fmt.Printf("B5: repo %d files, %d commits, packed %.1f MiB (head tree %.1f MiB); %s in %.1fs (%s)\n",
		info.files, info.commits, float64(info.packed)/(1<<20), float64(info.treeBytes)/(1<<20), how, genTime.Seconds(), cached)
	fmt.Printf("B5: edit: pool %s, runner and workspace-template digests; kustomize %s, %s\n", target, b5Version(b, kustomize), gittest.Git(b, "", "--version"))
	fmt.Printf("B5: slipway's commit changes %s; the git CLI's %s\n", strings.Join(m.slipwayFiles, ", "), strings.Join(m.gitFiles, ", "))
	fmt.Printf("B5: (b) warm-up, untimed: slipway generation show --cache-dir (fills the cache at the previous head), a full git clone; then one commit lands on the remote\n")
	fmt.Printf("B5: (a) from nothing   slipway promote (shallow, in memory)  %7.3fs\n", m.slipwayA.Seconds())
	fmt.Printf("B5: (a) from nothing   git clone --depth 1 + edit + push     %7.3fs  (clone %.3f, kustomize %.3f, commit %.3f, push %.3f)\n",
		m.gitA.total().Seconds(), m.gitA.fetch.Seconds(), m.gitA.edit.Seconds(), m.gitA.commit.Seconds(), m.gitA.push.Seconds())
	fmt.Printf("B5: (b) existing clone slipway promote --cache-dir           %7.3fs\n", m.slipwayB.Seconds())
	fmt.Printf("B5: (b) existing clone git pull --ff-only + edit + push      %7.3fs  (pull %.3f, kustomize %.3f, commit %.3f, push %.3f)\n",
		m.gitB.total().Seconds(), m.gitB.fetch.Seconds(), m.gitB.edit.Seconds(), m.gitB.commit.Seconds(), m.gitB.push.Seconds())
	fmt.Printf("B5: (a) slipway/git %.2f (target <= 1.0: %s)\n", ra, b5Met(ra <= 1))
	fmt.Printf("B5: (b) slipway/git %.2f (target <= 1.0: %s)\n", rb, b5Met(rb <= 1))
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B5a", What: smoke + "promote a pool into a config repo, from nothing",
		Slipway: fmt.Sprintf("%.2f s", m.slipwayA.Seconds()), Peer: fmt.Sprintf("git clone --depth 1 + kustomize edit + commit + push %.2f s", m.gitA.total().Seconds()),
		Ratio: ra, Target: "<= 1.0x", Met: ra <= 1}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B5b", What: smoke + "promote from an existing clone",
		Slipway: fmt.Sprintf("%.2f s", m.slipwayB.Seconds()), Peer: fmt.Sprintf("git pull + kustomize edit + commit + push %.2f s", m.gitB.total().Seconds()),
		Ratio: rb, Target: "<= 1.0x", Met: rb <= 1}))
}

type b5Times struct {
	slipwayA, slipwayB     time.Duration
	gitA, gitB             b5GitTimes
	slipwayFiles, gitFiles []string // what each commit changed
}

type b5GitTimes struct{ fetch, edit, commit, push time.Duration }

func (t b5GitTimes) total() time.Duration { return t.fetch + t.edit + t.commit + t.push }

func b5Met(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// b5GitEdit is the git CLI's edit in a clone: kustomize edit set image in
// the pool's folder, git commit -a, git push.
func b5GitEdit(b *testing.B, timed func(func()) time.Duration, kustomize, clone, pool string, images []string) (edit, commit, push time.Duration) {
	b.Helper()
	edit = timed(func() {
		b5Run(b, filepath.Join(clone, "pools", pool), kustomize, append([]string{"edit", "set", "image"}, images...)...)
	})
	commit = timed(func() {
		gittest.Git(b, clone, "commit", "--quiet", "-a", "-m", pool+": set runner and workspace-template images")
	})
	push = timed(func() { gittest.Git(b, clone, "push", "--quiet", "origin", "main") })
	return edit, commit, push
}

// b5OtherCommit lands one commit (the same one: fixed content and dates) on
// both remotes with the git CLI and returns it.
func b5OtherCommit(b *testing.B, urls ...string) string {
	b.Helper()
	work := filepath.Join(b.TempDir(), "other")
	gittest.Git(b, "", "clone", "--quiet", "--depth", "1", urls[0], work)
	file := filepath.Join(work, "clusters", "c-00", "README.md")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("# Cluster c-00\n\nOwned by the platform team.\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	gittest.Git(b, work, "add", "-A")
	date := "GIT_AUTHOR_DATE=2030-01-01T00:00:00Z"
	cmd := exec.Command("git", "-c", "user.name=other", "-c", "user.email=other@example.invalid", "commit", "--quiet", "-m", "c-00: readme")
	cmd.Dir, cmd.Env = work, append(os.Environ(), date, "GIT_COMMITTER_DATE=2030-01-01T00:00:00Z", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git commit: %v\n%s", err, out)
	}
	for _, u := range urls {
		gittest.Git(b, work, "push", "--quiet", u, "HEAD:refs/heads/main")
	}
	return gittest.Git(b, work, "rev-parse", "HEAD")
}

// b5Changed lists the files the remote's head commit changed.
func b5Changed(b *testing.B, dir string) []string {
	b.Helper()
	return strings.Split(gittest.Git(b, dir, "diff", "--name-only", "main~1", "main"), "\n")
}

// b5Check verifies a remote after an edit: one new commit directly on
// parent whose kustomization holds the digests, and a clean git fsck.
func b5Check(b *testing.B, what, dir, parent, pool string, digests []string) {
	b.Helper()
	if got := gittest.Git(b, dir, "rev-parse", "main~1"); got != parent {
		b.Fatalf("%s: the new head's parent is %s, want %s", what, got, parent)
	}
	k := gittest.Git(b, dir, "show", "main:pools/"+pool+"/kustomization.yaml")
	for _, d := range digests {
		if !strings.Contains(k, d) {
			b.Fatalf("%s: %s not in the pushed kustomization.yaml:\n%s", what, d, k)
		}
	}
	if out, err := gittest.Run(dir, "fsck", "--no-progress", "--no-dangling"); err != nil {
		b.Fatalf("%s: git fsck: %v\n%s", what, err, out)
	}
}

func b5Run(b *testing.B, dir, bin string, args ...string) string {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func b5Version(b *testing.B, kustomize string) string {
	return strings.TrimSpace(b5Run(b, "", kustomize, "version"))
}

func b5GenID(b *testing.B, file string) string {
	g, err := generation.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	return g.ID
}

// b5PreviousGeneration writes the pool's current target generation from
// repo to a file in dir and returns it with the repositories of its runner
// and workspace-template pins.
func b5PreviousGeneration(b *testing.B, repo, name, dir string) (file, runnerRepo, templateRepo string) {
	b.Helper()
	st, err := pool.ParseState([]byte(gittest.Git(b, repo, "show", "main:"+pool.StateFile(name))+"\n"), pool.StateFile(name))
	if err != nil {
		b.Fatal(err)
	}
	doc := gittest.Git(b, repo, "show", "main:"+pool.GenerationFile(name, st.Target)) + "\n"
	file = filepath.Join(dir, "previous.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	g, err := generation.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	repoOf := func(k generation.Kind) string { r, _, _ := strings.Cut(g.Pins[k].Image, "@"); return r }
	return file, repoOf(generation.Runner), repoOf(generation.WorkspaceTemplate)
}

type b5Info struct {
	files, commits    int
	packed, treeBytes int64
}

func b5Describe(b *testing.B, dir string) b5Info {
	b.Helper()
	var in b5Info
	in.files = len(strings.Split(gittest.Git(b, dir, "ls-tree", "-r", "--name-only", "main"), "\n"))
	in.commits, _ = strconv.Atoi(gittest.Git(b, dir, "rev-list", "--count", "main"))
	for _, l := range strings.Split(gittest.Git(b, dir, "count-objects", "-v"), "\n") {
		if v, ok := strings.CutPrefix(l, "size-pack: "); ok {
			kib, _ := strconv.ParseInt(v, 10, 64)
			in.packed = kib << 10
		}
	}
	for _, l := range strings.Split(gittest.Git(b, dir, "ls-tree", "-r", "-l", "main"), "\n") {
		if f := strings.Fields(l); len(f) >= 4 {
			n, _ := strconv.ParseInt(f[3], 10, 64)
			in.treeBytes += n
		}
	}
	return in
}
