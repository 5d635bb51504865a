package main

import (
	"context"
	"flag"
	"os"
	"strings"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

func main() {
	claim, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	fd := fs.Int("listen-fd", 0, "")
	cfg := runner.Config{Digest: strings.TrimSpace(string(claim)), Env: os.Environ()}
	fs.StringVar(&cfg.Generation, "generation", "", "")
	fs.StringVar(&cfg.SandboxID, "sandbox", "", "")
	fs.StringVar(&cfg.Workdir, "workdir", "/", "")
	_ = fs.Parse(os.Args[3:])
	ln, err := runner.ListenerFromFD(*fd)
	if err != nil {
		panic(err)
	}
	_ = runner.Serve(context.Background(), ln, cfg)
}
