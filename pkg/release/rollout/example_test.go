package rollout_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// A rollout's intent is one commit; Status reads it back. (Driving it,
// Run, needs a Fleet: a runtime's client.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rollout-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(url, "main"); err != nil {
		log.Fatal(err)
	}
	if _, err := release.InitConfig(ctx, url, "main", "agents", nil, gitops.Signature{}); err != nil {
		log.Fatal(err)
	}
	pins := func(n byte) map[generation.Kind]generation.Pin {
		d := "@sha256:" + strings.Repeat(string(n), 64)
		return map[generation.Kind]generation.Pin{
			generation.ControlPlane: {Image: "registry.example/cp" + d}, generation.Runner: {Image: "registry.example/runner" + d},
			generation.WorkspaceTemplate: {Image: "registry.example/tpl" + d},
		}
	}
	compat := &generation.Compatibility{ControlPlaneProtocol: generation.Range{Min: 1, Max: 1}, RunnerProtocol: generation.Range{Min: 1, Max: 1}}
	g1, _ := generation.New("agents", nil, pins('1'), compat)
	g2, _ := generation.New("agents", g1, pins('2'), nil)
	for i, g := range []*generation.Generation{g1, g2} {
		if _, err := release.Promote(ctx, release.Promotion{Repo: url, Generation: g, Activate: i == 0, SkipVerify: true}); err != nil {
			log.Fatal(err)
		}
	}

	repo, err := gitops.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	d := &rollout.Driver{Repo: repo, Pool: "agents"}
	r, err := d.Start(ctx, g2.ID, false)
	if err != nil {
		log.Fatal(err)
	}
	st, err := d.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Phase, r.Status, st.Active == g1.ID, st.Target == g2.ID)
	// Output: compatibility running true true
}
