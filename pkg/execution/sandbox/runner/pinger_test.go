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

// TestPingerKept: a pinger that asked its runner's identity keeps that
// connection; handed to another client (Keep), that client's first
// Pinger is it, and its pings go over the proof's connection (the second
// client dials nothing). A second Pinger call makes a new pinger. When
// the kept connection dies (the runner stops: its connections close), the
// ping that finds it dead fails and the next connection is dialled at
// once, by the client it was handed to, without waiting for a ping.
func TestPingerKept(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "r.sock")
	stop := startRunner(t, sock)
	dial := runner.DialUnix(sock)
	counting := func(n *atomic.Int32) runner.DialFunc {
		return func(ctx context.Context) (net.Conn, error) {
			n.Add(1)
			return dial(ctx)
		}
	}
	var proofDials, claimDials atomic.Int32
	ctx := context.Background()
	proof := runner.NewClient(counting(&proofDials)).Pinger()
	id, err := proof.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.SandboxID != "sb-1" || id.Generation != "g-1" || id.RunnerBinarySHA256 != "sha256:"+strings.Repeat("cd", 32) {
		t.Fatalf("identity %+v", id)
	}
	claim := runner.NewClient(counting(&claimDials))
	claim.Keep(proof)
	p := claim.Pinger()
	if p != proof {
		t.Fatal("the client's first pinger is not the one kept")
	}
	defer p.Close()
	if other := claim.Pinger(); other == proof {
		t.Fatal("the kept pinger was handed out twice")
	} else {
		other.Close()
	}
	for i := range 3 {
		if _, err := p.Ping(ctx); err != nil {
			t.Fatalf("ping %d on the kept connection: %v", i, err)
		}
	}
	if a, b := proofDials.Load(), claimDials.Load(); a != 1 || b != 0 {
		t.Fatalf("dials: %d by the proof's client, %d by the claim's; want 1 and 0", a, b)
	}

	// the kept connection dies for real; a new pinger handed the same way
	// finds it dead at its first ping
	proof2 := runner.NewClient(counting(&proofDials)).Pinger()
	if _, err := proof2.Identity(ctx); err != nil {
		t.Fatal(err)
	}
	var fallbackDials atomic.Int32
	fallback := runner.NewClient(counting(&fallbackDials))
	fallback.Keep(proof2)
	p2 := fallback.Pinger()
	defer p2.Close()
	stop()
	startRunner(t, sock)
	if _, err := p2.Ping(ctx); err == nil {
		t.Fatal("a ping over a connection the stopped runner closed answered")
	}
	for deadline := time.Now().Add(10 * time.Second); fallbackDials.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no dial begun after the kept connection failed")
		}
	}
	if _, err := p2.Ping(ctx); err != nil {
		t.Fatalf("ping after the kept connection died: %v", err)
	}
	if n := fallbackDials.Load(); n != 1 {
		t.Fatalf("dialled %d times after the kept connection died, want 1", n)
	}
}
