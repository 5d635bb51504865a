package kubesandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/slipway-dev/slipway/pkg/api/kubeobjects"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// DialRunner reaches the runner of a rendered pod (package render) through
// the API server's pod exec: every connection is an exec, in the pod's
// workspace container, of `slipway-runner connect` on the runner's unix
// socket (kubeobjects.RunnerSocket), whose standard input and output are the
// connection; what flows over it is the runner protocol, unchanged. The
// exec rides the caller's Kubernetes credentials, RBAC (pods/exec in the
// namespace) and audit; the pod opens no port. The connection is up when
// the bridge's hello came back (runner.BridgeHello): a pod that is gone,
// or a runner that does not listen, fails the dial with
// runner.ErrUnavailable and what the exec said.
//
// Each dial makes its own executor: client-go's WebSocket executor keeps
// the connection of its last round trip in itself, so one executor shared
// by concurrent dials (a heartbeat beside an exec) races.
func DialRunner(cfg *rest.Config, namespace, pod string) runner.DialFunc {
	argv := []string{kubeobjects.RunnerBinary, "connect", kubeobjects.RunnerSocket}
	return func(ctx context.Context) (net.Conn, error) {
		exec, err := newExecutor(cfg, namespace, pod, kubeobjects.WorkspaceContainer, argv)
		if err != nil {
			return nil, err
		}
		return dialExec(ctx, exec, namespace+"/"+pod)
	}
}

// newExecutor is an executor of argv in container of pod: WebSocket
// first, SPDY where the API server does not upgrade to it (as kubectl
// exec does).
func newExecutor(cfg *rest.Config, namespace, pod, container string, argv []string) (remotecommand.Executor, error) {
	u, err := url.Parse(strings.TrimSuffix(cfg.Host, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("kube: API server address %q: %v", cfg.Host, err)
	}
	if u.Scheme == "" {
		u.Scheme = "https"
	}
	u.Path += "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod) + "/exec"
	q := url.Values{"container": {container}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	for _, a := range argv {
		q.Add("command", a)
	}
	u.RawQuery = q.Encode()
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("kube: pod exec %s/%s: %w", namespace, pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("kube: pod exec %s/%s: %w", namespace, pod, err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// maxExecStderr bounds what an exec's stderr keeps for an error message.
const maxExecStderr = 4 << 10

// dialExec starts exec with pipes for its streams and returns them as a
// connection once the bridge's hello arrived.
func dialExec(ctx context.Context, exec remotecommand.Executor, what string) (net.Conn, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sctx, cancel := context.WithCancel(context.Background())
	c := &execConn{in: inW, out: bufio.NewReaderSize(outR, 64<<10), outR: outR, cancel: cancel, done: make(chan struct{}), what: what}
	go func() {
		defer close(c.done)
		stderr := &capped{max: maxExecStderr}
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		if err == nil {
			err = io.EOF
		} else if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		} else {
			err = fmt.Errorf("pod exec %s: %w", what, err)
		}
		_ = inR.CloseWithError(err)
		_ = outW.CloseWithError(err)
	}()
	hello := make(chan error, 1)
	go func() { hello <- runner.ReadBridgeHello(c.out) }()
	select {
	case err := <-hello:
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("kube: runner of pod %s: %w", what, err)
		}
		return c, nil
	case <-ctx.Done():
		c.Close()
		<-hello
		return nil, ctx.Err()
	}
}

// execConn is a pod exec's stdin and stdout as a net.Conn. Close ends the
// exec: its stdin closes, so the bridge closes the runner's socket (a
// running command is killed) and exits, which ends the stream; one that
// has not ended after closeGrace is torn down.
type execConn struct {
	in     *io.PipeWriter
	out    *bufio.Reader
	outR   *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	what   string
	once   sync.Once
}

var _ net.Conn = (*execConn)(nil)

func (c *execConn) Read(b []byte) (int, error)  { return c.out.Read(b) }
func (c *execConn) Write(b []byte) (int, error) { return c.in.Write(b) }

// closeGrace is how long a closed connection's exec may take to end by
// itself (its stdin closed, the bridge exits) before its stream is torn
// down.
const closeGrace = 10 * time.Second

func (c *execConn) Close() error {
	c.once.Do(func() {
		_ = c.in.Close()
		_ = c.outR.Close()
		go func() {
			t := time.NewTimer(closeGrace)
			defer t.Stop()
			select {
			case <-c.done:
			case <-t.C:
			}
			c.cancel()
		}()
	})
	return nil
}

// execAddr names a pod exec as an address.
type execAddr string

func (a execAddr) Network() string { return "kube-exec" }
func (a execAddr) String() string  { return string(a) }

func (c *execConn) LocalAddr() net.Addr  { return execAddr("runtime") }
func (c *execConn) RemoteAddr() net.Addr { return execAddr(c.what) }

// errNoDeadline: a pod exec has no deadlines; the runner's client closes a
// connection when its context ends instead.
var errNoDeadline = fmt.Errorf("kube: pod exec connection: deadlines: %w", errors.ErrUnsupported)

func (c *execConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (c *execConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (c *execConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.max - c.buf.Len(); n > 0 {
		c.buf.Write(b[:min(n, len(b))])
	}
	return len(b), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
