package serve_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/execution/runtime"
	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
	"github.com/slipway-dev/slipway/pkg/release"
)

// Run is `slipway runtime serve`: it follows the config repository and
// serves the API until the context ends. Here the repository declares a
// pool with no generation yet, so no sandbox is made; a client asks the
// runtime which revision of the repository it serves from, and the
// context's end stops it.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "serve-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	repo := filepath.Join(dir, "config.git")
	if err := gitops.InitBare(repo, "main"); err != nil {
		panic(err)
	}
	if _, err := release.InitConfig(ctx, repo, "main", "agents", nil, gitops.Signature{}); err != nil {
		panic(err)
	}
	const token = "example-token-of-the-api"
	ready := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		// no generation to verify yet: skipping verification is spelled out
		served <- serve.Run(ctx, serve.Config{Repo: repo, State: filepath.Join(dir, "state"), Listen: "127.0.0.1:0", Token: token,
			Verify: runtime.Verify{Skip: true}}, func(addr string) { ready <- addr })
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-served:
		panic(err)
	}
	c, err := runtimeapi.NewClient("http://"+addr, token)
	if err != nil {
		panic(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(info.ObservedRevision), info.LastSyncError == "")
	stop()
	fmt.Println("stopped:", <-served)
	// Output:
	// 40 true
	// stopped: <nil>
}
