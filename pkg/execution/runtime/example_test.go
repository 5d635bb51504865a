package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/release"
)

func ExampleLoad() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "runtime-example-")
	defer os.RemoveAll(dir)
	url := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(url, "main"); err != nil {
		fmt.Println(err)
		return
	}
	// A pool with nothing promoted yet.
	if _, err := release.InitConfig(ctx, url, "main", "agents", nil, gitops.Signature{}); err != nil {
		fmt.Println(err)
		return
	}
	repo, _ := gitops.Open(ctx, url)
	tree, rev, _ := repo.Snapshot(ctx, "main")
	// No policy in this repository: the example skips verification, which
	// must be said (a runtime never does it by default).
	d, err := runtime.Load(ctx, tree, rev, runtime.Verify{Skip: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := d.Pools["agents"]
	_, active := p.Active()
	fmt.Println(len(d.Pools), p.Pool.Spec.WarmSize, active, len(p.Warm()))
	// Output:
	// 1 2 false 0
}
