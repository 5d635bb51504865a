// Command slipway-cmp is Slipway's Argo CD config management plugin alone:
// the generate and parameters commands of `slipway argocd`, in a binary
// that links only what they need, so that the plugin, run by Argo CD's
// argocd-cmp-server for every render, starts in a few milliseconds
// instead of the full CLI's tens (its dependencies' init). Its output,
// errors and exit codes are slipway argocd generate's and parameters'.
//
//	slipway-cmp generate [--verify-cache-dir DIR] [--output yaml|json]   # 0 rendered, 1 refused, 2 usage, input or I/O
//	slipway-cmp parameters
//	slipway-cmp version                                                   # release tag (or v0.0.0-<commit>, untagged), commit, Go
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
)

// Exit codes, as the slipway CLI's.
const (
	exitOK      = 0
	exitRefused = 1
	exitUsage   = 2
)

func main() {
	// A render is one short burst of allocation (tens of MiB, then exit):
	// the collector would run several times for nothing, a quarter of the
	// render's time. It stays off up to a soft limit of 256 MiB (a pool
	// whose render needs more is collected near it, as usual), unless the
	// sidecar's GOGC or GOMEMLIMIT say otherwise.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(256 << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: slipway-cmp generate [--verify-cache-dir DIR] [--output yaml|json] | parameters | version")
		return exitUsage
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "slipway-cmp: %v\n", err)
		return exitUsage
	}
	switch args[0] {
	case "generate":
		fs := flag.NewFlagSet("generate", flag.ContinueOnError)
		fs.SetOutput(stderr)
		var o argocd.GenerateOptions
		fs.StringVar(&o.CacheDir, "verify-cache-dir", os.Getenv(argocd.EnvVerifyCacheDir), "keep passing verification results here for the next run (a directory private to the plugin)")
		fs.StringVar(&o.Output, "output", argocd.OutputYAML, "yaml, or json: one JSON object per line (what the plugin.yaml asks for)")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			if err == nil {
				fmt.Fprintf(stderr, "slipway-cmp generate: unexpected arguments %q\n", fs.Args())
			}
			return exitUsage
		}
		err := argocd.PluginGenerate(ctx, wd, os.Getenv, o, stdout, stderr)
		switch {
		case errors.Is(err, render.ErrNotVerified):
			fmt.Fprintf(stderr, "slipway-cmp: %v\n", err)
			return exitRefused
		case err != nil:
			fmt.Fprintf(stderr, "slipway-cmp: %v\n", err)
			return exitUsage
		}
		return exitOK
	case "version":
		fmt.Fprintf(stdout, "slipway-cmp %s\n", version.Get())
		return exitOK
	case "parameters":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "slipway-cmp parameters: unexpected arguments %q\n", args[1:])
			return exitUsage
		}
		if err := argocd.PluginParameters(wd, os.Getenv, stdout); err != nil {
			fmt.Fprintf(stderr, "slipway-cmp: %v\n", err)
			return exitUsage
		}
		return exitOK
	default:
		fmt.Fprintf(stderr, "slipway-cmp: unknown command %q (generate, parameters, version)\n", args[0])
		return exitUsage
	}
}
