package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
)

// Pinger is a heartbeat of one runner over one connection it keeps
// between pings (ping may repeat on a connection): where every connection
// costs something of its own (on Kubernetes a pod exec, a process started
// in the sandbox's container), a ping a second costs one connection per
// runner instead of one a second. A ping that fails, or whose context
// ends, closes the connection; the next ping dials anew, so a runner
// restarted or a bridge broken is reached again without waiting. Its
// methods are safe for concurrent use: pings queue.
type Pinger struct {
	c *Client

	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// Pinger returns a heartbeat of c's runner. Close it when done.
func (c *Client) Pinger() *Pinger { return &Pinger{c: c} }

// Ping is Client.Ping on the pinger's connection, dialled first when it
// has none.
func (p *Pinger) Ping(ctx context.Context) (*Pong, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		conn, err := p.c.connect(ctx)
		if err != nil {
			return nil, err
		}
		p.conn, p.r = conn, bufio.NewReader(conn)
	}
	conn := p.conn
	closed := false
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	f, err := func() (*Frame, error) {
		if err := writeRequest(conn, &Request{Version: ProtocolVersion, Op: OpPing}); err != nil {
			return nil, err
		}
		return readFrame(p.r)
	}()
	if !stop() { // ctx ended: the connection is closed, whatever was read
		closed = true
		if err == nil {
			err = ctx.Err()
		}
	}
	if err == nil {
		err = expect(f, FramePong)
	}
	if err == nil && f.Pong == nil {
		err = fmt.Errorf("%w: pong frame without pong", ErrProtocol)
	}
	if err != nil {
		if !closed {
			_ = conn.Close()
		}
		p.conn, p.r = nil, nil
		return nil, ctxErr(ctx, err)
	}
	return f.Pong, nil
}

// Close closes the pinger's connection, if it has one. A later Ping dials
// again.
func (p *Pinger) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
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
