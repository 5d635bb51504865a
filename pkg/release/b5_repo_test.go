package release_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/testharness/gittest"
)

// b5Params shape the generated repository: Pools folders each with
// pool.yaml, desired.yaml, kustomization.yaml, Generations generation
// documents and PoolManifests manifests; clusters/ fills up to Files; the
// history has Commits commits (one for clusters/, one seeding each pool,
// one per promotion, and edits of manifests with fresh random content).
type b5Params struct {
	Pools, Generations, PoolManifests, Files, Commits int
	Seed                                              uint64
}

// b5Format changes whenever the generator's output changes, so an old
// cached repository is not reused.
const b5Format = 1

// b5Repo returns a bare repository built from p, generated once and cached
// under ~/.cache/slipway-bench/ (built says whether it was generated now).
// Callers copy it; they never write to it.
func b5Repo(b *testing.B, p b5Params) (dir string, built bool) {
	b.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	key := sha256.Sum256(fmt.Appendf(nil, "%d %+v", b5Format, p))
	dir = filepath.Join(base, "slipway-bench", fmt.Sprintf("b5-%d-files-%d-commits-%s.git", p.Files, p.Commits, hex.EncodeToString(key[:6])))
	if _, err := os.Stat(filepath.Join(dir, "slipway-bench-complete")); err == nil {
		return dir, false
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		b.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "b5-building-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	gittest.Git(b, "", "init", "--quiet", "--bare", "--initial-branch=main", tmp)
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	genErr := b5Generate(w, p)
	if err := w.Flush(); genErr == nil {
		genErr = err
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil || genErr != nil {
		b.Fatalf("git fast-import: %v %v\n%s", err, genErr, stderr.String())
	}
	// What a hosting server does to a repository: one pack with deltas,
	// bitmaps and a commit-graph.
	gittest.Git(b, tmp, "gc", "--quiet", "--prune=now")
	gittest.Git(b, tmp, "config", "http.receivepack", "true")
	if err := os.WriteFile(filepath.Join(tmp, "slipway-bench-complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "slipway-bench-complete")); serr == nil {
			return dir, false // another run finished it first
		}
		b.Fatal(err)
	}
	return dir, true
}

// b5Gen holds the state of the generated history.
type b5Gen struct {
	w       *bufio.Writer
	rng     *rand.Rand
	p       b5Params
	commits int
	when    int64
	pools   []*b5Pool
	files   []string // every manifest, for edits
}

type b5Pool struct {
	name      string
	seeded    bool
	manifests []string
	gen       *generation.Generation
	state     *pool.State
}

// b5Generate writes the fast-import stream of the repository to w.
func b5Generate(w *bufio.Writer, p b5Params) error {
	g := &b5Gen{w: w, rng: rand.New(rand.NewPCG(p.Seed, 5)), p: p, when: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}
	perPool := 3 + p.Generations + p.PoolManifests
	clusterFiles := p.Files - 1 - p.Pools*perPool
	events := p.Pools * (1 + p.Generations)
	edits := p.Commits - 1 - events
	if clusterFiles < 0 || edits < 0 {
		return fmt.Errorf("b5: %+v: too few files or commits for the pools", p)
	}
	// First commit: README and clusters/.
	files := map[string][]byte{"README.md": []byte("# Config repository (generated for benchmark B5)\n\nDesired state of every pool, reviewed like code.\n")}
	for i := range clusterFiles {
		f := fmt.Sprintf("clusters/c-%02d/app-%03d/%s", i%20, i/20%50, b5ManifestName(i))
		files[f] = g.manifest(f)
		g.files = append(g.files, f)
	}
	g.commit("clusters: initial layout", files)
	// Then pools are seeded, promoted and edited in a random order.
	var order []int // pool index, or -1 for an edit
	for i := range p.Pools {
		g.pools = append(g.pools, &b5Pool{name: fmt.Sprintf("pool-%04d", i)})
		for range 1 + p.Generations {
			order = append(order, i)
		}
	}
	for range edits {
		order = append(order, -1)
	}
	g.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, ev := range order {
		var err error
		switch {
		case ev < 0:
			g.edit()
		case !g.pools[ev].seeded:
			g.seed(g.pools[ev])
		default:
			err = g.promote(g.pools[ev])
		}
		if err != nil {
			return err
		}
	}
	if g.commits != p.Commits {
		return fmt.Errorf("b5: made %d commits, want %d", g.commits, p.Commits)
	}
	_, err := fmt.Fprintf(w, "done\n")
	return err
}

func (g *b5Gen) commit(msg string, files map[string][]byte) {
	g.commits++
	g.when += 600 + int64(g.rng.IntN(3000))
	from := ""
	if g.commits > 1 {
		from = fmt.Sprintf("from :%d\n", g.commits-1)
	}
	fmt.Fprintf(g.w, "commit refs/heads/main\nmark :%d\ncommitter Platform Bot <bot@example.invalid> %d +0000\ndata %d\n%s\n%s",
		g.commits, g.when, len(msg), msg, from)
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	slices.Sort(names)
	for _, f := range names {
		fmt.Fprintf(g.w, "M 100644 inline %s\ndata %d\n", f, len(files[f]))
		g.w.Write(files[f])
		g.w.WriteString("\n")
	}
	g.w.WriteString("\n")
}

var b5Kinds = []string{"deployment", "configmap", "service", "networkpolicy", "serviceaccount", "hpa"}

func b5ManifestName(i int) string {
	return fmt.Sprintf("%s-%02d.yaml", b5Kinds[i%len(b5Kinds)], i/len(b5Kinds))
}

// manifest is a Kubernetes-style document of 300 to 2,700 bytes, about
// half of them random.
func (g *b5Gen) manifest(path string) []byte {
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	noise := 150 + g.rng.IntN(1200)
	var sb strings.Builder
	fmt.Fprintf(&sb, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n    app.kubernetes.io/part-of: sandbox-platform\n    app.kubernetes.io/managed-by: slipway\n  annotations:\n    bench.slipway.dev/revision: \"%d\"\ndata:\n", name, filepath.Base(filepath.Dir(path)), g.commits)
	for i := 0; sb.Len() < noise; i++ {
		fmt.Fprintf(&sb, "  setting-%03d: \"enabled for the sandbox tier, see runbook\"\n", i)
	}
	sb.WriteString("  blob: ")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for range noise {
		sb.WriteByte(alphabet[g.rng.IntN(64)])
	}
	sb.WriteString("\n")
	return []byte(sb.String())
}

func (g *b5Gen) edit() {
	files := map[string][]byte{}
	for range 1 + g.rng.IntN(3) {
		f := g.files[g.rng.IntN(len(g.files))]
		files[f] = g.manifest(f)
	}
	g.commit(fmt.Sprintf("tune %d manifests", len(files)), files)
}

func (g *b5Gen) seed(pl *b5Pool) {
	pl.seeded = true
	files := map[string][]byte{}
	pb, _ := pool.Marshal(pool.Default(pl.name))
	files[pool.PoolFile(pl.name)] = pb
	pl.state = pool.NewState(pl.name)
	sb, _ := pool.Marshal(pl.state)
	files[pool.StateFile(pl.name)] = sb
	var res strings.Builder
	for i := range g.p.PoolManifests {
		f := pool.Dir(pl.name) + "/manifests/" + b5ManifestName(i)
		files[f] = g.manifest(f)
		pl.manifests = append(pl.manifests, f)
		fmt.Fprintf(&res, "  - manifests/%s\n", b5ManifestName(i))
	}
	g.files = append(g.files, pl.manifests...)
	files[pool.KustomizationFile(pl.name)] = []byte("# Images of pool " + pl.name + ", pinned by digest by slipway promote.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + pl.name + "\nresources:\n" + res.String() + "images: []\n")
	g.commit(pl.name+": seed the pool", files)
}

// promote writes what slipway promote would: the next generation (one or
// two pins changed), desired.yaml and the kustomization's images.
func (g *b5Gen) promote(pl *b5Pool) error {
	const reg = "registry.example.internal"
	pins := map[generation.Kind]generation.Pin{}
	img := func(repo string) generation.Pin {
		return generation.Pin{Image: reg + "/" + repo + "@" + b5Digest(g.rng)}
	}
	var compat *generation.Compatibility
	if pl.gen == nil {
		pins[generation.ControlPlane] = img("platform/control-plane")
		pins[generation.Runner] = img("platform/runner")
		pins[generation.WorkspaceTemplate] = img("templates/" + pl.name)
		pins[generation.NodeImage] = generation.Pin{ID: fmt.Sprintf("ami-%017x", g.rng.Uint64()>>4)}
		pins[generation.RuntimeClass] = generation.Pin{ID: "gvisor"}
		pins[generation.Policy] = generation.Pin{Git: &generation.GitPin{Repo: "https://git.example.internal/platform/policies", Commit: b5Digest(g.rng)[7:47]}}
		pins[generation.SecretVersion] = generation.Pin{ID: fmt.Sprintf("projects/p/secrets/%s/versions/%d", pl.name, 1+g.rng.IntN(9))}
		compat = &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 2}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	} else {
		for _, k := range []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate}[:1+g.rng.IntN(3)] {
			r, _, _ := strings.Cut(pl.gen.Pins[k].Image, "@")
			pins[k] = generation.Pin{Image: r + "@" + b5Digest(g.rng)}
		}
	}
	next, err := generation.New(pl.name, pl.gen, pins, compat)
	if err != nil {
		return err
	}
	doc, err := generation.Marshal(next)
	if err != nil {
		return err
	}
	at := time.Unix(g.when, 0).UTC()
	st := pl.state
	var gens []pool.GenState
	if pl.gen != nil {
		gens = append(gens, pool.GenState{ID: pl.gen.ID, Sequence: pl.gen.Sequence, State: pool.Active, WarmSize: 2, Since: at})
		for _, old := range st.Generations {
			if old.State == pool.Active {
				old.State = pool.Retained
				gens = append(gens, old)
				break
			}
		}
	}
	st.Generations, st.Target = append([]pool.GenState{}, gens...), next.ID
	st.History = append(st.History, pool.HistoryEntry{Target: next.ID, Sequence: next.Sequence, At: at})
	sb, err := pool.Marshal(st)
	if err != nil {
		return err
	}
	var res strings.Builder
	for _, f := range pl.manifests {
		fmt.Fprintf(&res, "  - manifests/%s\n", filepath.Base(f))
	}
	var imgs strings.Builder
	for _, k := range []generation.Kind{generation.ControlPlane, generation.Runner, generation.WorkspaceTemplate} {
		r, d, _ := strings.Cut(next.Pins[k].Image, "@")
		fmt.Fprintf(&imgs, "  - name: slipway/%s\n    newName: %s\n    digest: %s\n", k.ArtifactKind(), r, d)
	}
	kust := "# Images of pool " + pl.name + ", pinned by digest by slipway promote.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + pl.name + "\nresources:\n" + res.String() + "images:\n" + imgs.String()
	msg := fmt.Sprintf("%s: promote %s (sequence %d)\n\nSlipway-Pool: %s\nSlipway-Generation: %s\nSlipway-Step: promote\n", pl.name, next.ID, next.Sequence, pl.name, next.ID)
	g.commit(msg, map[string][]byte{
		pool.GenerationFile(pl.name, next.ID): doc,
		pool.StateFile(pl.name):               sb,
		pool.KustomizationFile(pl.name):       []byte(kust),
	})
	pl.gen = next
	return nil
}

func b5Digest(rng *rand.Rand) string {
	var h [32]byte
	for i := range h {
		h[i] = byte(rng.UintN(256))
	}
	return "sha256:" + hex.EncodeToString(h[:])
}
