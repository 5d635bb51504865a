package runner_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// startRunner serves a runner in-process on the unix socket sock until the
// returned func stops it (and waits until it has).
func startRunner(t *testing.T, sock string) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Serve(ctx, ln, runner.Config{Digest: "sha256:" + strings.Repeat("cd", 32), Generation: "g-1", SandboxID: "sb-1", Workdir: t.TempDir()})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestPingerKeepsItsConnection: a pinger's pings share one connection (one
// dial, counted by the dial function), each answered by the runner anew;
// a runner that went away fails the next ping, and the one after it dials
// the runner started again in its place.
func TestPingerKeepsItsConnection(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	stop := startRunner(t, sock)
	var dials atomic.Int32
	dial := runner.DialUnix(sock)
	p := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx)
	}).Pinger()
	defer p.Close()
	ctx := context.Background()
	var last time.Time
	for i := range 5 {
		pong, err := p.Ping(ctx)
		if err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		if pong.Time.Before(last) || pong.Time.IsZero() {
			t.Fatalf("ping %d answered at %v, the one before at %v", i, pong.Time, last)
		}
		last = pong.Time
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("5 pings dialled %d times, want 1", n)
	}

	stop() // the runner closes its connections
	if _, err := p.Ping(ctx); err == nil {
		t.Fatal("a ping of a stopped runner answered")
	}
	startRunner(t, sock)
	if _, err := p.Ping(ctx); err != nil {
		t.Fatalf("ping of the runner started again: %v", err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("dialled %d times, want 2 (once more for the runner started again)", n)
	}
}

// TestPingerContextEnded: a ping whose context has ended fails with the
// context's error and drops the connection; the next ping dials anew. A
// closed pinger dials again too.
func TestPingerContextEnded(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	startRunner(t, sock)
	var dials atomic.Int32
	dial := runner.DialUnix(sock)
	p := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx)
	}).Pinger()
	defer p.Close()
	if _, err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ping with an ended context: %v, want context.Canceled", err)
	}
	if _, err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("dialled %d times, want 2: the ended ping's connection is not reused", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 3 {
		t.Fatalf("dialled %d times, want 3: a closed pinger dials again", n)
	}
}
