package serve_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/slipway-dev/slipway/pkg/execution/runtime/serve"
)

// Run is `slipway runtime serve`: it follows the config repository and
// serves the API until the context ends (here, on Ctrl-C). Not run as a
// test: it needs bubblewrap and a config repository.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := serve.Run(ctx, serve.Config{
		Repo: "/srv/config.git", State: "/var/lib/slipway", Listen: "127.0.0.1:7070",
		Token: os.Getenv("SLIPWAY_RUNTIME_TOKEN"), Log: os.Stderr,
	}, func(addr string) { fmt.Fprintln(os.Stderr, "serving on", addr) })
	if err != nil {
		log.Fatal(err)
	}
}
