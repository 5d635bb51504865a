package render_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// readLog is a Tree that records the paths read and listed.
type readLog struct {
	render.Tree
	mu    sync.Mutex
	paths []string
}

func (r *readLog) ReadFile(p string) ([]byte, error) {
	r.mu.Lock()
	r.paths = append(r.paths, p)
	r.mu.Unlock()
	return r.Tree.ReadFile(p)
}

func (r *readLog) List(p string) ([]string, error) {
	r.mu.Lock()
	r.paths = append(r.paths, p+"/")
	r.mu.Unlock()
	return r.Tree.List(p)
}

// A render reads the pool's folder and the folders its kustomization
// names (a base, transitively, and a component), not the rest of the
// config repository: a checkout of 10,000 files is not copied for a pool
// that reads a few.
func TestReadsOnlyWhatKustomizeCanRead(t *testing.T) {
	f := goldenTree(t)
	f[pool.KustomizationFile("agents")] = strings.Replace(kustomization, "resources:\n", "resources:\n  - ../../bases/common\n", 1) + "components:\n  - ../../components/audit\n"
	f["bases/common/kustomization.yaml"] = "resources:\n  - quota.yaml\n  - ../shared\n"
	f["bases/common/quota.yaml"] = "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: sandboxes\nspec:\n  hard:\n    pods: \"100\"\n"
	f["bases/shared/kustomization.yaml"] = "resources:\n  - limits.yaml\n"
	f["bases/shared/limits.yaml"] = "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: sandboxes\n"
	f["components/audit/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonAnnotations:\n  audit.example/owner: platform\n"
	for i := range 50 {
		f["clusters/prod/app-"+string(rune('a'+i%26))+string(rune('a'+i/26))+".yaml"] = "not: [kustomize input\n"
	}
	tree, rev, _ := commit(t, f)
	log := &readLog{Tree: tree}
	res, err := render.Pool(context.Background(), log, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: ResourceQuota", "kind: LimitRange", "audit.example/owner: platform", "kind: SandboxWarmPool"} {
		if !strings.Contains(string(res.YAML), want) {
			t.Errorf("render lacks %q", want)
		}
	}
	for _, p := range log.paths {
		if strings.HasPrefix(p, "clusters") || p == "/" {
			t.Errorf("read %s, which the pool's kustomization cannot reach", p)
		}
	}
}
