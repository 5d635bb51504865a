package runner_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// pipeConn is the far end of a Bridge: its input and output as a net.Conn.
type pipeConn struct {
	net.Conn // unused methods
	r        io.Reader
	w        io.WriteCloser
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error                { return p.w.Close() }

// A Bridge carries the runner protocol unchanged after its hello: a
// client whose dial runs one (as a pod exec of `slipway-runner connect`
// does) gets identity and exec; a bridge to a socket nobody listens on
// fails, and ReadBridgeHello says it did not reach the runner.
func TestBridge(t *testing.T) {
	_, sock := serve(t)
	dial := func(path string) runner.DialFunc {
		return func(ctx context.Context) (net.Conn, error) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			go func() { outW.CloseWithError(runner.Bridge(path, inR, outW)) }()
			r := bufio.NewReader(outR)
			if err := runner.ReadBridgeHello(r); err != nil {
				return nil, err
			}
			return &pipeConn{r: r, w: inW}, nil
		}
	}
	c := runner.NewClient(dial(sock))
	ctx := context.Background()
	if id, err := c.Identity(ctx); err != nil || id.SandboxID != "sb-1" {
		t.Fatalf("identity through a bridge: %+v %v", id, err)
	}
	var out bytes.Buffer
	st, err := c.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "echo hi; exit 4"}}, &out, &out)
	if err != nil || st.ExitCode != 4 || out.String() != "hi\n" {
		t.Fatalf("exec through a bridge: %+v %v %q", st, err, out.String())
	}
	_, err = runner.NewClient(dial(filepath.Join(t.TempDir(), "none.sock"))).Ping(ctx)
	if !errors.Is(err, runner.ErrUnavailable) || !strings.Contains(err.Error(), "before its hello") {
		t.Fatalf("a bridge to no runner: %v", err)
	}
}
