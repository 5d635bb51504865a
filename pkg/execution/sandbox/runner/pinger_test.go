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

// TestPingerContextEnded: a ping whose context has ended before it began
// fails with the context's error and leaves the connection, which the next
// ping uses (one dial in all). A closed pinger pings, and dials, no more.
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
	if n := dials.Load(); n != 1 {
		t.Fatalf("dialled %d times, want 1: a ping whose context ended before it began leaves the connection", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ping(context.Background()); !errors.Is(err, runner.ErrUnavailable) {
		t.Fatalf("ping of a closed pinger: %v, want ErrUnavailable", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("dialled %d times, want 1: a closed pinger does not dial", n)
	}
}

// TestPingerSlowDial: a dial begun by Dial, slower than a ping's
// deadline, goes on after that ping failed, and the next ping takes its
// connection (one dial in all), instead of each ping beginning a dial that
// its deadline ends.
func TestPingerSlowDial(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	startRunner(t, sock)
	var dials atomic.Int32
	dial := runner.DialUnix(sock)
	open := make(chan struct{}) // the dial waits until it is closed
	p := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return dial(ctx)
	}).Pinger()
	defer p.Close()
	p.Dial() // begun before the first ping
	p.Dial() // and not again
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := p.Ping(ctx)
		cancel()
		if !errors.Is(err, runner.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ping while the dial is under way: %v, want ErrUnavailable and the deadline", err)
		}
	}
	close(open)
	if _, err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("dialled %d times, want 1", n)
	}
}

// TestPingerCloseDuringDial: Close ends a dial under way and returns once
// it has ended.
func TestPingerCloseDuringDial(t *testing.T) {
	ended := make(chan struct{})
	p := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		<-ctx.Done() // a dial that never answers but for its context
		close(ended)
		return nil, ctx.Err()
	}).Pinger()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Ping(ctx); err == nil {
		t.Fatal("a ping answered without a connection")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the dial under way ended")
	}
}
