package argocd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v2/reposerver/apiclient"
	"github.com/argoproj/argo-cd/v2/reposerver/repository"
	"github.com/argoproj/argo-cd/v2/util/git"
	argoio "github.com/argoproj/argo-cd/v2/util/io"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/testharness/benchtable"
	"github.com/slipway-dev/slipway/testharness/need"
)

// b12Tree writes, beside checkout's pool agents, the rest of a config
// repository of the shape of benchmark B5's (pkg/release: 200 pools of 10
// generations and 27 manifests each, clusters/ filling up to 10,000 files;
// here pools pools and files files;
// manifests of 300 to 2,700 bytes, half random): 199 more pools and the
// clusters' manifests, and pool agents' own 27 manifests and
// kustomization. It returns how many files the tree holds.
func b12Tree(tb testing.TB, root string, pools, files int) int {
	tb.Helper()
	rng := rand.New(rand.NewPCG(12, 5))
	kinds := []string{"deployment", "configmap", "service", "networkpolicy", "serviceaccount", "hpa"}
	manifest := func(name, ns string) string {
		noise := 150 + rng.IntN(1200)
		var sb strings.Builder
		fmt.Fprintf(&sb, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n    app.kubernetes.io/part-of: sandbox-platform\ndata:\n", name, ns)
		for i := 0; sb.Len() < noise; i++ {
			fmt.Fprintf(&sb, "  setting-%03d: \"enabled for the sandbox tier, see runbook\"\n", i)
		}
		sb.WriteString("  blob: ")
		for range noise {
			sb.WriteByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[rng.IntN(64)])
		}
		sb.WriteString("\n")
		return sb.String()
	}
	write := func(p, body string) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	pool := func(name string, gens int) {
		var res strings.Builder
		for i := range 27 {
			f := fmt.Sprintf("%s-%02d.yaml", kinds[i%len(kinds)], i/len(kinds))
			write("pools/"+name+"/manifests/"+f, manifest(strings.TrimSuffix(f, ".yaml"), name))
			fmt.Fprintf(&res, "  - manifests/%s\n", f)
		}
		write("pools/"+name+"/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: sandboxes\nlabels:\n  - pairs:\n      team: "+name+"\nresources:\n"+res.String())
		if name == "agents" {
			return
		}
		write("pools/"+name+"/pool.yaml", strings.Replace(poolYAML, "name: agents", "name: "+name, 1))
		write("pools/"+name+"/desired.yaml", "apiVersion: slipway.dev/v1alpha1\nkind: PoolState\npool: "+name+"\ngenerations: []\n")
		for g := range gens {
			write(fmt.Sprintf("pools/%s/generations/g-%064x.yaml", name, rng.Uint64()), manifest(fmt.Sprint("g", g), name))
		}
	}
	pool("agents", 0)
	for i := 1; i < pools; i++ {
		pool(fmt.Sprintf("pool-%04d", i), 10)
	}
	n := 0
	filepath.Walk(root, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	for i := 0; n < files; i, n = i+1, n+1 {
		f := fmt.Sprintf("clusters/c-%02d/app-%03d/%s-%02d.yaml", i%20, i/20%50, kinds[i%len(kinds)], i/len(kinds))
		write(f, manifest(strings.TrimSuffix(filepath.Base(f), ".yaml"), filepath.Base(filepath.Dir(f))))
	}
	return n
}

// BenchmarkB12ArgoCD is benchmark B12: Argo CD's CMP server running
// Slipway's plugin.yaml renders and verifies pool agents, with 20
// generations (60 images signed by the key the policy trusts, in the
// in-process registry), of a config repository of B5's shape (10,000
// files), driven by Argo CD's client as the repo-server does (the whole
// checkout streamed by SendRepoStream, then `slipway-cmp generate` in
// the sidecar); beside it, in the same run, `kustomize build` ($KUSTOMIZE,
// the CLI make bench builds) of the same pool's kustomization with the
// generated objects added as a resource, on disk. It reports the plugin
// with an empty verification cache (every signature checked against the
// registry) and with the results kept in $SLIPWAY_VERIFY_CACHE_DIR by an
// earlier render (the steady state: Argo CD renders again on every
// refresh), the same with clusters/ left out of the stream (the
// repo-server's tar exclusions), the pool's folder alone streamed
// (reposerver.plugin.use.manifest.generate.paths with the Application's
// manifest-generate-paths: ".", verified by the operator's policy) warm
// and cold, the checkout's stream and untar alone (a MatchRepository
// call), the generate command alone in the checkout (no streaming), and
// kustomize's time, and the ratios. The peer of the targets is what an Argo
// CD user would otherwise run: Argo CD's native kustomize source through the
// repo-server's own code (repository.GenerateManifests, running the same
// kustomize CLI) on the same input, taken in turns with the pool-folder
// renders. Targets: the pool-folder render at or under 1.0x of it warm,
// 1.5x cold. BENCH_SMOKE=1: 4 generations, 2,000 files.
func BenchmarkB12ArgoCD(b *testing.B) {
	sampler := benchtable.Start()
	kustomize := need.Env(b, "KUSTOMIZE", "set it to the kustomize CLI (make bench does)")
	n, pools, total := 20, 200, 10000
	if os.Getenv("BENCH_SMOKE") != "" {
		n, pools, total = 4, 40, 2000
	}
	w := newWorld(b)
	var gens []*gen
	var states []string
	prev := ""
	for i := range n {
		label := fmt.Sprint("g", i)
		gens = append(gens, w.generation(b, label, prev,
			w.image(b, fmt.Sprintf("platform/control-plane:cp%d", i), "ci"),
			w.image(b, fmt.Sprintf("platform/runner:r%d", i), "ci"),
			w.image(b, fmt.Sprintf("templates/tools:t%d", i), "ci")))
		prev = label
		states = append(states, map[bool]string{true: "retained", false: "draining"}[i < n-3])
	}
	states[n-2], states[n-1] = "active", "warming"
	root := b.TempDir()
	w.checkout(b, root, nil, map[string]string{"pools/agents/desired.yaml": statesYAML(gens, states)})
	files := b12Tree(b, root, pools, total)
	cacheDir := filepath.Join(b.TempDir(), "verify")
	s := startCMP(b, "SLIPWAY_VERIFY_CACHE_DIR="+cacheDir)
	// The operator's policy for the pool-folder layout: the same bytes as
	// the repository's (so the same verification cache entries serve both),
	// set only around those renders.
	opDir := b.TempDir()
	w.checkout(b, opDir, nil, nil)
	operator := filepath.Join(opDir, "policies", "verification.yaml")
	rev := strings.Repeat("b1", 20)
	a := app{name: "pool-agents", path: "pools/agents", revision: rev, params: map[string]string{"pool": "agents"}}

	// The kustomize input: the pool's kustomization and manifests, and the
	// objects the plugin generated (its own are those Slipway adds).
	first, err := s.generate(b, root, a)
	if err != nil {
		b.Fatal(err)
	}
	input := b.TempDir()
	var generated strings.Builder
	for _, m := range first {
		var o struct{ Kind string }
		if err := json.Unmarshal([]byte(m), &o); err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(o.Kind, "Sandbox") {
			y, err := yaml.JSONToYAML([]byte(m))
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&generated, "---\n%s", y)
		}
	}
	if err := os.CopyFS(input, os.DirFS(filepath.Join(root, "pools", "agents"))); err != nil {
		b.Fatal(err)
	}
	kb, err := os.ReadFile(filepath.Join(input, "kustomization.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for f, body := range map[string]string{"generated.yaml": generated.String(), "kustomization.yaml": string(kb) + "  - generated.yaml\n"} {
		if err := os.WriteFile(filepath.Join(input, f), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	out, err := exec.Command(kustomize, "build", input).Output()
	if err != nil {
		b.Fatalf("kustomize build: %v %s", err, exitStderr(err))
	}
	if got, want := strings.Count(string(out), "kind: SandboxTemplate"), strings.Count(generated.String(), "kind: SandboxTemplate"); got != n || want != n || len(first) < n+27 {
		b.Fatalf("kustomize: %d SandboxTemplates, plugin %d, want %d; plugin: %d objects", got, want, n, len(first))
	}

	// The peer an Argo CD user would otherwise run: Argo CD's native
	// kustomize source, through the repo-server's own code
	// (reposerver/repository.GenerateManifests, which runs $KUSTOMIZE as
	// the repo-server runs its kustomize binary, then parses and labels the
	// objects for the Application), on the same input, in the checkout as
	// the repo-server has it (nothing streamed).
	logrus.SetLevel(logrus.WarnLevel) // the repo-server code traces every kustomize run at info
	argoNative := func() []string {
		res, err := repository.GenerateManifests(context.Background(), input, input, rev, &apiclient.ManifestRequest{
			Repo:              &v1alpha1.Repository{Repo: "https://git.example.com/config.git"},
			ApplicationSource: &v1alpha1.ApplicationSource{RepoURL: "https://git.example.com/config.git", Path: "pools/agents", TargetRevision: "main", Kustomize: &v1alpha1.ApplicationSourceKustomize{}},
			AppName:           "pool-agents", Namespace: "argocd", AppLabelKey: "app.kubernetes.io/instance", TrackingMethod: "label",
			KustomizeOptions: &v1alpha1.KustomizeOptions{BinaryPath: kustomize},
		}, false, git.NoopCredsStore{}, resource.MustParse("100Mi"), argoio.NewRandomizedTempPaths(b.TempDir()))
		if err != nil {
			b.Fatalf("Argo CD's kustomize source (repo-server GenerateManifests): %v", err)
		}
		if res.SourceType != string(v1alpha1.ApplicationSourceTypeKustomize) {
			b.Fatalf("Argo CD took the source for %s, want Kustomize", res.SourceType)
		}
		return res.Manifests
	}
	if got := argoNative(); len(got) != strings.Count(string(out), "\nkind: ")+boolInt(strings.HasPrefix(string(out), "kind: ")) {
		b.Fatalf("Argo CD's kustomize source: %d objects, kustomize build printed %d", len(got), strings.Count(string(out), "\nkind: ")+boolInt(strings.HasPrefix(string(out), "kind: ")))
	}

	timed := func(f func()) time.Duration {
		b.StartTimer()
		start := time.Now()
		f()
		d := time.Since(start)
		b.StopTimer()
		return d
	}
	env := a.environ(b)
	var cold, warm, excluded, alone, stream, kust, folder, folderCold, argoWarm time.Duration
	// With reposerver.plugin.use.manifest.generate.paths and the
	// Application's manifest-generate-paths: ".", only pools/agents is
	// streamed, and the operator's policy verifies.
	af := a
	af.alone = true
	withOperator := func(f func()) {
		os.Setenv("SLIPWAY_ARGOCD_POLICY_FILE", operator)
		defer os.Unsetenv("SLIPWAY_ARGOCD_POLICY_FILE")
		f()
	}
	// The repo-server can leave out of the stream what no plugin reads
	// (argocd-cmd-params-cm reposerver.plugin.tar.exclusions).
	ax := a
	ax.exclude = []string{"clusters"}
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(cacheDir); err != nil {
			b.Fatal(err)
		}
		var m1, m2 []string
		cold = timed(func() { m1, err = s.generate(b, root, a) })
		if err != nil {
			b.Fatal(err)
		}
		warm = timed(func() { m2, err = s.generate(b, root, a) })
		if err != nil || strings.Join(m1, "") != strings.Join(m2, "") || strings.Join(m1, "") != strings.Join(first, "") {
			b.Fatalf("renders differ: %v", err)
		}
		var m3 []string
		excluded = timed(func() { m3, err = s.generate(b, root, ax) })
		if err != nil || strings.Join(m3, "") != strings.Join(first, "") {
			b.Fatalf("render with clusters/ left out of the stream differs: %v", err)
		}
		if kept, _ := filepath.Glob(filepath.Join(cacheDir, "*.json")); len(kept) != 3*n {
			b.Fatalf("verification cache: %d results, want %d", len(kept), 3*n)
		}
		var m4 []string
		withOperator(func() { folder = timed(func() { m4, err = s.generate(b, root, af) }) })
		if err != nil || strings.Join(m4, "") != strings.Join(first, "") {
			b.Fatalf("render of the pool's folder alone differs: %v", err)
		}
		if err := os.RemoveAll(cacheDir); err != nil {
			b.Fatal(err)
		}
		withOperator(func() { folderCold = timed(func() { m4, err = s.generate(b, root, af) }) })
		if err != nil || strings.Join(m4, "") != strings.Join(first, "") {
			b.Fatalf("cold render of the pool's folder alone differs: %v", err)
		}
		alone = timed(func() {
			if r := runBin(b, cmpBin, filepath.Join(root, "pools", "agents"), env, "generate", "--output", "json"); r.code != 0 {
				b.Fatalf("slipway-cmp generate: exit %d\n%s", r.code, r.stderr)
			}
		})
		// What the CMP protocol costs before any command runs: the
		// checkout tarred, streamed and untarred (MatchRepository does
		// that and a glob).
		stream = timed(func() { s.stream(b, root, a) })
		// The pool-folder render beside kustomize build, five times each,
		// taken in turns: the medians are compared (one run of each on a
		// shared machine is noise).
		// The whole-checkout renders above left tens of MiB of garbage in
		// this process, which runs Argo CD's server: collected now, not in
		// the middle of the pairs.
		runtime.GC()
		var fs, ks, as []time.Duration
		for range 5 {
			as = append(as, timed(func() { argoNative() }))
			withOperator(func() { fs = append(fs, timed(func() { m4, err = s.generate(b, root, af) })) })
			if err != nil || strings.Join(m4, "") != strings.Join(first, "") {
				b.Fatalf("render of the pool's folder alone differs: %v", err)
			}
			ks = append(ks, timed(func() {
				if err := exec.Command(kustomize, "build", input).Run(); err != nil {
					b.Fatal(err)
				}
			}))
		}
		folder, kust, argoWarm = median(fs), median(ks), median(as)
		b.StartTimer()
	}
	b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
	b.ReportMetric(float64(warm.Milliseconds()), "warm-ms")
	b.ReportMetric(float64(alone.Milliseconds()), "generate-ms")
	b.ReportMetric(float64(stream.Milliseconds()), "stream-ms")
	b.ReportMetric(float64(excluded.Milliseconds()), "warm-excluding-clusters-ms")
	b.ReportMetric(float64(kust.Milliseconds()), "kustomize-ms")
	b.ReportMetric(float64(folder.Milliseconds()), "pool-folder-warm-ms")
	b.ReportMetric(float64(folderCold.Milliseconds()), "pool-folder-cold-ms")
	b.ReportMetric(float64(argoWarm.Milliseconds()), "argocd-kustomize-ms")
	b.ReportMetric(float64(folder)/float64(argoWarm), "pool-folder/argocd-kustomize")
	b.ReportMetric(float64(warm)/float64(kust), "warm/kustomize")
	b.ReportMetric(float64(folder)/float64(kust), "pool-folder/kustomize")
	fmt.Fprintf(os.Stderr, "B12: %d generations (%d signed images), %d files: CMP server render+verify, whole checkout streamed: cold cache %v, warm cache %v (the checkout's stream and untar alone, as MatchRepository pays it, %v; warm with clusters/ left out of the stream %v); pool's folder alone streamed (manifest-generate-paths, operator policy): warm cache %v, cold cache %v; generate alone in the checkout %v; kustomize build (CLI) %v; pool-folder warm/kustomize %.2fx (target 1.5x), pool-folder cold/kustomize %.2fx, whole-checkout warm/kustomize %.2fx, cold/kustomize %.2fx, generate/kustomize %.2fx\n",
		n, 3*n, files, cold.Round(time.Millisecond), warm.Round(time.Millisecond), stream.Round(time.Millisecond), excluded.Round(time.Millisecond),
		folder.Round(time.Millisecond), folderCold.Round(time.Millisecond), alone.Round(time.Millisecond), kust.Round(time.Millisecond),
		float64(folder)/float64(kust), float64(folderCold)/float64(kust), float64(warm)/float64(kust), float64(cold)/float64(kust), float64(alone)/float64(kust))
	// Argo CD's source keeps nothing between renders (no verification, no
	// cache): both of Slipway's states are set beside the same figure.
	warmX, coldX := float64(folder)/float64(argoWarm), float64(folderCold)/float64(argoWarm)
	fmt.Fprintf(os.Stderr, "B12: beside Argo CD's native kustomize source through the repo-server's GenerateManifests (the same input, kustomize %s): %v (median of 5, taken in turns with the pool-folder renders); pool-folder warm %.2fx (target <= 1.0x: %s), cold %.2fx (target <= 1.5x: %s)\n",
		kustomize, argoWarm.Round(time.Millisecond), warmX, metWord(warmX <= 1), coldX, metWord(coldX <= 1.5))
	smoke := ""
	if os.Getenv("BENCH_SMOKE") != "" {
		smoke = "smoke: "
	}
	what := fmt.Sprintf("%srender and verify a pool of %d generations (%d signed images), the pool's folder streamed to the CMP server", smoke, n, 3*n)
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B12 warm", What: what, Slipway: fmt.Sprintf("%d ms", folder.Milliseconds()),
		Peer:  fmt.Sprintf("Argo CD's kustomize source (repo-server code) %d ms; kustomize build %d ms", argoWarm.Milliseconds(), kust.Milliseconds()),
		Ratio: warmX, Target: "<= 1.0x", Met: warmX <= 1,
		Settings: fmt.Sprintf("Slipway verifies %d signatures (results cached) and streams the folder over the CMP protocol; Argo CD's source verifies nothing and streams nothing", 3*n)}))
	benchtable.Emit(b, sampler.Finish(benchtable.Row{Bench: "B12 cold", What: what + ", verification cache empty", Slipway: fmt.Sprintf("%d ms", folderCold.Milliseconds()),
		Peer:  fmt.Sprintf("Argo CD's kustomize source (repo-server code) %d ms", argoWarm.Milliseconds()),
		Ratio: coldX, Target: "<= 1.5x", Met: coldX <= 1.5}))
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// median is the middle of ds (the upper one of the two middles).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
