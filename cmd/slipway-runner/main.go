// Command slipway-runner is the runner artifact: a static binary that runs
// inside each sandbox, executes the commands the runtime sends over a unix
// socket and proves its identity. See package runner for the protocol.
//
//	slipway-runner serve --listen-fd 0 --generation G --sandbox ID --workdir DIR
//	slipway-runner version
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/slipway-dev/slipway/pkg/sandbox/runner"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "slipway-runner:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: slipway-runner serve|version [flags]")
	}
	digest, err := runner.SelfDigest()
	if err != nil {
		return err
	}
	switch args[0] {
	case "version":
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"runnerDigest": digest, "protocolVersion": runner.ProtocolVersion, "minProtocolVersion": runner.MinProtocolVersion})
	case "serve":
	default:
		return fmt.Errorf("unknown command %q: want serve or version", args[0])
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fd := fs.Int("listen-fd", 0, "file descriptor of the listening unix socket")
	cfg := runner.Config{Digest: digest, Env: os.Environ(), Log: os.Stderr}
	fs.StringVar(&cfg.Generation, "generation", "", "the generation this sandbox belongs to")
	fs.StringVar(&cfg.SandboxID, "sandbox", "", "the sandbox's id")
	fs.StringVar(&cfg.Workdir, "workdir", "/", "default working directory of commands")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := runner.Harden(); err != nil {
		return err
	}
	ln, err := runner.ListenerFromFD(*fd)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runner.Serve(ctx, ln, cfg); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
