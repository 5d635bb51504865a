package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// DialFunc opens a new connection to a runner.
type DialFunc func(ctx context.Context) (net.Conn, error)

// DialUnix dials the runner's unix socket at path.
func DialUnix(path string) DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}

// Client talks to one runner. Every call opens a connection of its own, so
// calls may run concurrently (an exec beside a heartbeat) and a call that
// fails leaves nothing behind. Its methods are safe for concurrent use.
type Client struct {
	dial DialFunc

	mu   sync.Mutex
	kept *Pinger // handed over by Keep, for the next Pinger call
}

// NewClient returns a client that reaches its runner through dial.
func NewClient(dial DialFunc) *Client { return &Client{dial: dial} }

// Keep hands p, a pinger of the same runner whose connection is open (an
// identity asked over it, say), to c: c's next Pinger call returns it
// instead of a new pinger, so that the heartbeat it is for dials nothing
// while that connection lives; later dials, p's included, are c's. A
// pinger kept before and not taken is closed.
func (c *Client) Keep(p *Pinger) {
	p.ping.Lock()
	p.c = c
	p.handed = p.conn != nil
	p.ping.Unlock()
	c.mu.Lock()
	old := c.kept
	c.kept = p
	c.mu.Unlock()
	if old != nil && old != p {
		_ = old.Close()
	}
}

// Identity asks the runner who it is. It does not check the answer: the
// caller compares RunnerBinarySHA256 and Generation with what it expects.
func (c *Client) Identity(ctx context.Context) (*Identity, error) {
	f, err := c.call(ctx, &Request{Version: ProtocolVersion, Op: OpIdentity}, FrameIdentity)
	if err != nil {
		return nil, err
	}
	return identityOf(f)
}

// identityOf is the identity an identity frame carries, its binary's
// digest taken from the older field when a runner sent only that.
func identityOf(f *Frame) (*Identity, error) {
	if f.Identity == nil {
		return nil, fmt.Errorf("%w: identity frame without identity", ErrProtocol)
	}
	if f.Identity.RunnerBinarySHA256 == "" {
		f.Identity.RunnerBinarySHA256 = f.Identity.LegacyRunnerDigest
	}
	return f.Identity, nil
}

// Ping is a heartbeat: it returns when the runner answered.
func (c *Client) Ping(ctx context.Context) (*Pong, error) {
	f, err := c.call(ctx, &Request{Version: ProtocolVersion, Op: OpPing}, FramePong)
	if err != nil {
		return nil, err
	}
	if f.Pong == nil {
		return nil, fmt.Errorf("%w: pong frame without pong", ErrProtocol)
	}
	return f.Pong, nil
}

// Exec runs req in the sandbox, writing its output to stdout and stderr as
// it arrives (nil discards; one writer for both keeps their order), and
// returns how the command ended. A non-zero exit, a timeout and truncated
// output are in the ExitStatus, not errors. Errors are for a command that
// did not start (ErrStart), a runner that cannot be reached
// (ErrUnavailable) or breaks the protocol (ErrProtocol), a writer that
// fails, and ctx ending: then the command is killed and the error wraps
// ctx's. A stdout that is an EventWriter also gets the command's events
// (the runner's EventPayloadFetched, then the workload's), in order with
// the output.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (*ExitStatus, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	ew, _ := stdout.(EventWriter)
	req.Events = ew != nil
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // the runner kills the command
	defer stop()
	if err := writeRequest(conn, &Request{Version: ProtocolVersion, Op: OpExec, Exec: &req}); err != nil {
		return nil, ctxErr(ctx, err)
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		f, err := readFrame(r)
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		switch f.Type {
		case FrameOutput:
			w := stdout
			switch f.Stream {
			case StreamStdout:
			case StreamStderr:
				w = stderr
			default:
				return nil, fmt.Errorf("%w: output frame for stream %q", ErrProtocol, f.Stream)
			}
			if _, err := w.Write(f.Data); err != nil {
				return nil, fmt.Errorf("runner: write %s: %w", f.Stream, err)
			}
		case FrameEvent:
			if ew == nil || f.Event == nil {
				return nil, fmt.Errorf("%w: an event frame the exec did not ask for", ErrProtocol)
			}
			if err := ew.WriteEvent(*f.Event); err != nil {
				return nil, fmt.Errorf("runner: write event %s: %w", f.Event.Kind, err)
			}
		case FrameExit:
			if f.Exit == nil {
				return nil, fmt.Errorf("%w: exit frame without status", ErrProtocol)
			}
			return f.Exit, nil
		case FrameError:
			return nil, remoteError(f)
		default:
			return nil, fmt.Errorf("%w: unexpected %q frame during exec", ErrProtocol, f.Type)
		}
	}
}

// call sends one request and reads one frame of type want.
func (c *Client) call(ctx context.Context, req *Request, want string) (*Frame, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := writeRequest(conn, req); err != nil {
		return nil, ctxErr(ctx, err)
	}
	f, err := readFrame(bufio.NewReader(conn))
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if err := expect(f, want); err != nil {
		return nil, err
	}
	return f, nil
}

func (c *Client) connect(ctx context.Context) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctxErr(ctx, err))
	}
	return conn, nil
}

func writeRequest(w io.Writer, req *Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(b) > MaxRequestBytes {
		return fmt.Errorf("runner: request of %d bytes is over %d", len(b), MaxRequestBytes)
	}
	_, err = w.Write(append(b, '\n'))
	if err != nil {
		return fmt.Errorf("%w: send request: %w", ErrUnavailable, err)
	}
	return nil
}

func readFrame(r *bufio.Reader) (*Frame, error) {
	line, err := readLine(r, MaxFrameBytes)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: connection closed before the answer", ErrProtocol)
		}
		if errors.Is(err, ErrProtocol) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	var f Frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, fmt.Errorf("%w: malformed frame: %v", ErrProtocol, err)
	}
	return &f, nil
}

func remoteError(f *Frame) error {
	if f.Error == nil {
		return fmt.Errorf("%w: error frame without error", ErrProtocol)
	}
	return f.Error
}

// ctxErr prefers ctx's error when ctx ended: the connection error is then
// only its consequence.
func ctxErr(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return fmt.Errorf("runner: %w", cerr)
	}
	return err
}
