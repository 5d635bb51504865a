package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/slipway-dev/slipway/pkg/gitops"
	"github.com/slipway-dev/slipway/pkg/runs"
	"github.com/slipway-dev/slipway/pkg/sandbox"
	"github.com/slipway-dev/slipway/pkg/sandbox/local"
)

// Config is what `slipway runtime serve` runs with.
type Config struct {
	// Repo is the config repository; Branch its branch (default main).
	Repo, Branch string
	// State is the state directory: sandboxes, run manifests, caches.
	State string
	// Listen is the API's address; Token its bearer token.
	Listen, Token string
	// MaxStaleness bounds how old the view of the config repository may be
	// for claims to be granted (default 30s); SyncInterval is the poll
	// period (default 2s).
	MaxStaleness, SyncInterval time.Duration
	Verify                     Verify
	// Log receives one line per event worth knowing (default: discard).
	Log io.Writer
}

// Serve runs the runtime until ctx ends: it follows the config repository,
// keeps the warm pools, and serves the API. Ready is called with the
// address it listens on.
func Serve(ctx context.Context, c Config, ready func(addr string)) error {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.MaxStaleness <= 0 {
		c.MaxStaleness = 30 * time.Second
	}
	state, err := filepath.Abs(c.State)
	if err != nil {
		return err
	}
	c.State = state
	// Traversable (not listable) by the users templates run as: their
	// sandboxes' roots live below it.
	if err := os.MkdirAll(c.State, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(c.State, 0o711); err != nil {
		return err
	}
	repo, err := gitops.Open(ctx, c.Repo, gitops.WithCacheDir(filepath.Join(c.State, "config-cache")))
	if err != nil {
		return err
	}
	be, err := local.New(filepath.Join(c.State, "sandboxes"))
	if err != nil {
		return err
	}
	defer be.Close()
	if gone, err := sandbox.Reap(ctx, be); err == nil && len(gone) > 0 {
		fmt.Fprintf(c.Log, "reaped %d sandboxes of an earlier run\n", len(gone))
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(c.State, runs.StateFile))
	if err != nil {
		return err
	}
	defer store.Close()
	syncer := NewSyncer(repo, c.Branch, c.Verify, c.SyncInterval)
	if d, err := syncer.Sync(ctx); err != nil {
		fmt.Fprintf(c.Log, "first sync: %v\n", err)
	} else {
		fmt.Fprintf(c.Log, "synced %s\n", d.Summary())
	}
	warm := NewWarm(be, NewRegistryArtifacts(filepath.Join(c.State, "artifacts")))
	rt := NewRuntime(func() (*Desired, time.Time) { d, at, _ := syncer.Current(); return d, at }, warm, store, c.MaxStaleness)
	srv, err := NewServer(rt, syncer, be, c.Token)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go syncer.Run(ctx)
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			if d, _, _ := syncer.Current(); d != nil {
				if rep := warm.Reconcile(ctx, d); len(rep.Created)+len(rep.Deleted)+len(rep.Errors) > 0 {
					fmt.Fprintf(c.Log, "warm pools: %d created, %d deleted, errors %v\n", len(rep.Created), len(rep.Deleted), rep.Errors)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer c2()
		_ = hs.Shutdown(sctx)
	}()
	if ready != nil {
		ready(ln.Addr().String())
	}
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Stop: the sandboxes go with the runtime (they die with it anyway).
	all, _ := be.List(context.Background(), sandbox.Filter{})
	for _, s := range all {
		_ = be.Delete(context.Background(), s.ID)
	}
	return nil
}
