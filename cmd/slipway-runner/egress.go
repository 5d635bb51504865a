package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
)

// egressProxy is `slipway-runner egress --listen ADDR --allow LIST`: an
// allow-list pool's egress proxy inside a Kubernetes pod (render's
// slipway-egress container, as a user of its own). It enforces the
// allow-list (comma-separated pool.yaml network.allow entries) with
// package egress, the same proxy the local backend runs on the host, and
// writes every attempt as one JSON line on out (the container's log), when
// the attempt ends. It runs until SIGTERM or SIGINT and then records what
// was still open.
func egressProxy(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	listen := fs.String("listen", "", "TCP address to serve the proxy on (127.0.0.1:PORT: the pod's loopback)")
	allow := fs.String("allow", "", "the allow-list: comma-separated HOST:PORT, CIDR:PORT or *.DOMAIN:PORT entries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: slipway-runner egress --listen ADDR --allow ENTRY[,ENTRY...]")
	}
	var entries []string
	if *allow != "" {
		entries = strings.Split(*allow, ",")
	}
	pol, err := egress.Parse(entries)
	if err != nil {
		return fmt.Errorf("egress: --allow: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	px := &egress.Proxy{Policy: pol, Record: func(a egress.Attempt) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(a) // a log that cannot be written leaves enforcement as it is
	}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return px.Serve(ctx, ln)
}
