package render_test

import (
	"context"
	"testing"

	"github.com/slipway-dev/slipway/pkg/cluster/kubeapply"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/testharness/kubetest"
)

// The golden render is accepted by a real kube-apiserver's validation of
// agent-sandbox v0.5.6's own CRDs, and stored field for field as rendered
// (a structural schema drops fields it does not know without an error).
// No pod runs here: the runtime class, node selector and images are only
// validated, never used.
func TestGoldenAcceptedByAPIServer(t *testing.T) {
	c := kubetest.New(t)
	tree, rev, _ := commit(t, goldenTree(t))
	ctx := context.Background()
	res, err := render.Pool(ctx, tree, "agents", rev, render.WithInsecureSkipVerify())
	if err != nil {
		t.Fatal(err)
	}
	a, err := kubeapply.New(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := a.Apply(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Changes) != 8 {
		t.Fatalf("want 8 objects (namespace, config map, 4 templates, 2 warm pools), got %v", cs.Changes)
	}
	if err := c.CheckStored(ctx, res.YAML, "default"); err != nil {
		t.Fatal(err)
	}
}
