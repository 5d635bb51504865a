package render_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/testharness/registrytest"
)

// world is an in-process registry with signed images, a release key the
// config repository's policy trusts, and a rogue key it does not.
type world struct {
	host           string
	release, rogue signature.SignerVerifier
	releasePub     []byte
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	w := &world{host: registrytest.NewInProcess(tb)}
	for _, k := range []*signature.SignerVerifier{&w.release, &w.rogue} {
		priv, pub, err := sign.GenerateKeys([]byte("pw"))
		if err != nil {
			tb.Fatal(err)
		}
		if *k, err = sign.LoadSigner(priv, []byte("pw")); err != nil {
			tb.Fatal(err)
		}
		if k == &w.release {
			w.releasePub = pub
		}
	}
	return w
}

// image pushes an image holding content to repo, signs it with sv (none
// when nil) and returns its reference by digest.
func (w *world) image(tb testing.TB, repo, content string, sv signature.SignerVerifier) string {
	tb.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer([]byte(content), types.OCILayer))
	if err != nil {
		tb.Fatal(err)
	}
	d := registrytest.Push(tb, w.host+"/"+repo+":v1", img)
	if sv != nil {
		if _, err := sign.Sign(context.Background(), d, sv, sign.WithOfflineNoTlog()); err != nil {
			tb.Fatal(err)
		}
	}
	return d.String()
}

const policyDoc = `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata:
  name: release
spec:
  transparencyLog: none
  keys:
    - name: release
      publicKeyFile: keys/release.pub
  rules:
    - name: platform
      match:
        kinds: [control-plane, runner, workspace-template]
      signatures:
        keys: [release]
`

// files are the documents of a config repository.
type files map[string]string

// policy adds the verification policy trusting w's release key.
func (w *world) policy(f files) {
	f[pool.PolicyPath] = policyDoc
	f["policies/keys/release.pub"] = string(w.releasePub)
}

// gen makes generation number seq of pool with the given images and the
// usual id pins.
func gen(tb testing.TB, poolName string, seq int, cp, runner, tmpl string) *generation.Generation {
	tb.Helper()
	g, err := generation.New(poolName, nil, map[generation.Kind]generation.Pin{
		generation.ControlPlane:      {Image: cp},
		generation.Runner:            {Image: runner},
		generation.WorkspaceTemplate: {Image: tmpl},
		generation.RuntimeClass:      {ID: "gvisor-release-20261015.0"},
		generation.NodeImage:         {ID: "ami-0abc1234def567890", Name: "debian-12-agents", Tag: "2026.11"},
		generation.SecretVersion:     {ID: fmt.Sprintf("vault://kv/agents/token#%d", seq)},
	}, &generation.Compatibility{
		ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1},
	})
	if err != nil {
		tb.Fatal(err)
	}
	g.Sequence = int64(seq)
	return g
}

// addPool writes pool.yaml (with extra appended to spec), the generations
// and a desired.yaml giving each generation the matching state.
func addPool(tb testing.TB, f files, name, extra string, gens []*generation.Generation, states []string) {
	tb.Helper()
	pl := pool.Default(name)
	b, err := pool.Marshal(pl)
	if err != nil {
		tb.Fatal(err)
	}
	f[pool.PoolFile(name)] = string(b) + extra
	st := pool.NewState(name)
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, g := range gens {
		gb, err := generation.Marshal(g)
		if err != nil {
			tb.Fatal(err)
		}
		f[pool.GenerationFile(name, g.ID)] = string(gb)
		st.Generations = append(st.Generations, pool.GenState{ID: g.ID, Sequence: g.Sequence, State: states[i], WarmSize: 2 + i%3, Since: since})
	}
	sb, err := pool.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	f[pool.StateFile(name)] = string(sb)
}

// commit writes f into a new bare repository in one commit and returns
// the tree at that commit, the commit and the repository's path.
func commit(tb testing.TB, f files) (*gitops.Tree, string, string) {
	tb.Helper()
	ctx := context.Background()
	dir := filepath.Join(tb.TempDir(), "config.git")
	if err := gitops.InitBare(dir, "main"); err != nil {
		tb.Fatal(err)
	}
	repo, err := gitops.Open(ctx, dir)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = repo.Update(ctx, gitops.Request{Branch: "main", Edit: func(t *gitops.Tree) (*gitops.Commit, error) {
		for p, s := range f {
			if err := t.WriteFile(p, []byte(s)); err != nil {
				return nil, err
			}
		}
		return &gitops.Commit{Subject: "seed"}, nil
	}})
	if err != nil {
		tb.Fatal(err)
	}
	t, rev, err := repo.Snapshot(ctx, "main")
	if err != nil {
		tb.Fatal(err)
	}
	return t, rev, dir
}

func digestOf(ref string) string { return ref[strings.Index(ref, "@")+1:] }
