package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// pingerDialTimeout bounds a Pinger's dial: past it the dial fails and the
// next ping dials anew.
const pingerDialTimeout = 30 * time.Second

// Pinger is a heartbeat of one runner over one connection it keeps
// between pings (ping may repeat on a connection): where every connection
// costs something of its own (on Kubernetes a pod exec, a process started
// in the sandbox's container), a ping a second costs one connection per
// runner instead of one a second.
//
// The connection is dialled in the background: a ping whose context ends
// while the dial is under way fails, and the dial goes on for the next
// ping to wait for (at most pingerDialTimeout), so that a dial slower than
// one ping's deadline (a pod exec on a busy node) still ends in a
// connection instead of being begun again at every ping. A ping that
// fails on the connection, or whose context ends during it, closes it;
// the next dials anew, so a runner restarted or a bridge broken is reached
// again. Its methods are safe for concurrent use: pings queue.
//
// A pinger may also ask its runner's identity over its connection
// (Identity), and be kept, connection open, for the heartbeat of a later
// claim (Client.Keep): a proof's connection, handed over.
type Pinger struct {
	c *Client

	ping sync.Mutex // one ping at a time; guards the fields below
	conn net.Conn
	r    *bufio.Reader
	dial chan dialed // the dial under way, nil when none
	// handed: the connection came from elsewhere (Client.Keep) and was
	// not answered on since: should it fail, the next is dialled at once
	handed bool

	mu     sync.Mutex // guards closed and cancel
	closed bool
	cancel context.CancelFunc // of the dial under way
}

type dialed struct {
	conn net.Conn
	err  error
}

// Pinger returns a heartbeat of c's runner: the pinger handed to c by
// Keep, once, or else a new one. Close it when done.
func (c *Client) Pinger() *Pinger {
	c.mu.Lock()
	p := c.kept
	c.kept = nil
	c.mu.Unlock()
	if p != nil {
		return p
	}
	return &Pinger{c: c}
}

// Ping is Client.Ping on the pinger's connection, dialled first when it
// has none.
func (p *Pinger) Ping(ctx context.Context) (*Pong, error) {
	f, err := p.call(ctx, OpPing, FramePong)
	if err != nil {
		return nil, err
	}
	if f.Pong == nil {
		return nil, fmt.Errorf("%w: pong frame without pong", ErrProtocol)
	}
	return f.Pong, nil
}

// Identity is Client.Identity on the pinger's connection, dialled first
// when it has none; the connection stays open for the pings that follow.
func (p *Pinger) Identity(ctx context.Context) (*Identity, error) {
	f, err := p.call(ctx, OpIdentity, FrameIdentity)
	if err != nil {
		return nil, err
	}
	return identityOf(f)
}

// call sends a request of op on the pinger's connection (dialled first
// when it has none) and reads its answer, a frame of type want. A failure
// closes the connection; a handed one's failure begins the next dial at
// once.
func (p *Pinger) call(ctx context.Context, op, want string) (*Frame, error) {
	p.ping.Lock()
	defer p.ping.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.conn == nil {
		if p.dial == nil && !p.startDial() {
			return nil, fmt.Errorf("%w: the pinger is closed", ErrUnavailable)
		}
		select {
		case d := <-p.dial:
			p.dial = nil
			if d.err != nil {
				return nil, d.err
			}
			p.conn, p.r = d.conn, bufio.NewReader(d.conn)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctxErr(ctx, ctx.Err()))
		}
	}
	conn := p.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	f, err := func() (*Frame, error) {
		if err := writeRequest(conn, &Request{Version: ProtocolVersion, Op: op}); err != nil {
			return nil, err
		}
		return readFrame(p.r)
	}()
	if !stop() && err == nil { // ctx ended: the connection is closed, whatever was read
		err = ctx.Err()
	}
	if err == nil {
		err = expect(f, want)
	}
	if err != nil {
		_ = conn.Close()
		p.conn, p.r = nil, nil
		if p.handed && ctx.Err() == nil {
			// a kept connection that died unseen: the next ping finds
			// a new one made or under way rather than begins it
			p.startDial()
		}
		p.handed = false
		return nil, ctxErr(ctx, err)
	}
	p.handed = false
	return f, nil
}

// Dial begins dialling in the background, when the pinger has neither a
// connection nor a dial under way, so that the first ping finds the
// connection made or under way for longer.
func (p *Pinger) Dial() {
	p.ping.Lock()
	defer p.ping.Unlock()
	if p.conn == nil && p.dial == nil {
		p.startDial()
	}
}

// startDial begins a dial in the background (p.ping held); false when the
// pinger is closed.
func (p *Pinger) startDial() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingerDialTimeout)
	p.cancel = cancel
	ch := make(chan dialed, 1)
	p.dial = ch
	c := p.c
	go func() {
		conn, err := c.connect(ctx)
		cancel()
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed && conn != nil { // nobody will take it
			_ = conn.Close()
			conn, err = nil, fmt.Errorf("%w: the pinger is closed", ErrUnavailable)
		}
		ch <- dialed{conn, err}
	}()
	return true
}

// Close closes the pinger's connection and ends a dial under way; later
// pings fail.
func (p *Pinger) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	p.ping.Lock()
	defer p.ping.Unlock()
	if p.dial != nil { // its connection, if it made one, is closed by it
		d := <-p.dial
		if d.conn != nil {
			_ = d.conn.Close()
		}
		p.dial = nil
	}
	if p.conn == nil {
		return nil
	}
	err := p.conn.Close()
	p.conn, p.r = nil, nil
	return err
}

// expect says whether f is a frame of type want: a runner's error frame
// is its error, another frame a protocol error.
func expect(f *Frame, want string) error {
	switch f.Type {
	case want:
		return nil
	case FrameError:
		return remoteError(f)
	}
	return fmt.Errorf("%w: want a %q frame, got %q", ErrProtocol, want, f.Type)
}
