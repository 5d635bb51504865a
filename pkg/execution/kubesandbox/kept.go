package kubesandbox

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A warm member's proof (ProveWarm) is asked over a connection to its
// runner that stays open: its pod exec is the one the claim of that
// member then pings its runner over (runner.Client.Keep), so that no pod
// exec is opened at or after the grant of a warm claim (an exec loads the
// API server and the kubelet while the next claim is watched). One is
// kept per proved member of a warm pool, and closed when the member is
// dropped (deleted, or adopted by a claim this backend does not await),
// when its exec ends (the pod or its container gone, the bridge killed),
// when a keep-alive ping fails, or when ProveWarm ends. A claim that finds
// it dead dials as before; one that gets it dead (an end not seen yet)
// loses one ping at most, and the pinger dials the next connection at
// once.

// keepAliveEvery is how often a kept connection is pinged while its
// member is warm: often enough that no idle timeout on its way (the API
// server's proxy, the kubelet's streaming-connection-idle-timeout, 4 h by
// default, the container runtime's stream idle timeout) closes it, and
// that one dead unseen is found within a minute.
const keepAliveEvery = time.Minute

// keepAliveTimeout bounds a keep-alive ping.
const keepAliveTimeout = 10 * time.Second

// keptConn is a proof's open connection: its pinger, and the pod exec
// under it. Once handed over, the pinger is its claim's: close no longer
// closes it.
type keptConn struct {
	p    *runner.Pinger
	exec *execConn

	mu     sync.Mutex
	handed bool          // handed over (the claim's now)
	done   bool          // handed over or closed
	gone   chan struct{} // closed with done
}

// dialKept is a pinger of pod's runner that remembers the pod exec it
// dials (through dial), for keptConn.
func dialKept(dial runner.DialFunc) (*runner.Pinger, *atomic.Pointer[execConn]) {
	var ec atomic.Pointer[execConn]
	p := runner.NewClient(func(ctx context.Context) (net.Conn, error) {
		c, err := dial(ctx)
		if e := execConnOf(c); e != nil {
			ec.Store(e)
		}
		return c, err
	}).Pinger()
	return p, &ec
}

// execConnOf is the pod exec c is, or wraps (a connection with an
// Unwrap() net.Conn method: a test's counting one); nil when none.
func execConnOf(c net.Conn) *execConn {
	for c != nil {
		switch v := c.(type) {
		case *execConn:
			return v
		case interface{ Unwrap() net.Conn }:
			c = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

func newKept(p *runner.Pinger, exec *execConn) *keptConn {
	return &keptConn{p: p, exec: exec, gone: make(chan struct{})}
}

// alive says whether the exec under k has not ended (as far as seen).
func (k *keptConn) alive() bool {
	select {
	case <-k.exec.done:
		return false
	default:
		return true
	}
}

// close closes k's connection, unless it was handed over.
func (k *keptConn) close() {
	k.mu.Lock()
	handed := k.handed
	if !k.done {
		k.done = true
		close(k.gone)
	}
	k.mu.Unlock()
	if !handed {
		_ = k.p.Close()
	}
}

// handOver gives k's pinger to rc, for its claim's heartbeat, when its
// exec has not ended and k was not closed; it says whether it did. k is
// no longer kept either way.
func (k *keptConn) handOver(rc *runner.Client) bool {
	k.mu.Lock()
	ok := !k.done && k.alive()
	if !k.done {
		k.done = true
		close(k.gone)
	}
	k.handed = ok
	k.mu.Unlock()
	if !ok {
		_ = k.p.Close()
		return false
	}
	rc.Keep(k.p)
	return true
}

// watch drops k from pod's proof when its exec ends first.
func (b *Backend) watchKept(pod string, k *keptConn) {
	select {
	case <-k.exec.done:
		b.warm.dropKept(pod, k)
	case <-k.gone:
	}
}

// keepAlive pings every kept connection every keepAliveEvery until ctx
// ends; one whose ping fails is closed (the member's proof stays: it is
// checked against its pod and container at the claim).
func (b *Backend) keepAlive(ctx context.Context) {
	t := time.NewTicker(keepAliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for pod, k := range b.warm.keptAll() {
			pctx, cancel := context.WithTimeout(ctx, keepAliveTimeout)
			_, err := k.p.Ping(pctx)
			cancel()
			if err != nil {
				b.warm.dropKept(pod, k)
			}
		}
	}
}

// KeptWarm is how many warm members' proof connections are kept open now.
func (b *Backend) KeptWarm() int {
	return len(b.warm.keptAll())
}

// handedOver remembers the pinger handed to the claim of pod, so that the
// claim's deletion closes it should its user not have (a claim deleted
// by the reconciler, a user of the backend without a heartbeat).
func (b *Backend) handedOver(pod string, p *runner.Pinger) {
	b.mu.Lock()
	old := b.handed[pod]
	b.handed[pod] = p
	b.mu.Unlock()
	if old != nil && old != p {
		_ = old.Close()
	}
}

// closeHanded closes the pinger handed to the claim of pod, if any.
func (b *Backend) closeHanded(pod string) {
	b.mu.Lock()
	p := b.handed[pod]
	delete(b.handed, pod)
	b.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
}
