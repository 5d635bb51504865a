package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// BridgeHello is the line Bridge writes first, once it has reached the
// runner's socket: the far end of a bridge (a pod exec) reads it to know
// the connection is up before it sends a request. It is the bridge's, not
// the runner protocol's: after it, the bytes are the protocol's, unchanged.
const BridgeHello = "slipway-runner bridge v1\n"

// Bridge connects in and out to the runner listening on the unix socket
// at path: it writes BridgeHello to out, then copies in to the socket and
// the socket to out until either ends. It is `slipway-runner connect`,
// which a Kubernetes backend runs through the API server's pod exec, so
// its stdin and stdout become a connection to the runner in the pod. The
// end of in closes the socket (for the runner, the client went away: it
// kills a running command); the runner closing the socket ends Bridge
// with nil once everything it sent is written to out.
func Bridge(path string, in io.Reader, out io.Writer) error {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return fmt.Errorf("runner: bridge: %w", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(out, BridgeHello); err != nil {
		return fmt.Errorf("runner: bridge: %w", err)
	}
	if f, ok := out.(*os.File); ok {
		_ = f.Sync()
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		done <- err
	}()
	back := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		back <- err
	}()
	select {
	case err := <-back: // the runner closed the connection, or out failed
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("runner: bridge: %w", err)
		}
		return nil
	case <-done: // in ended: the client is gone
		conn.Close()
		<-back
		return nil
	}
}

// ReadBridgeHello reads BridgeHello from r, the far end of a Bridge; an
// error (ErrUnavailable) says the bridge did not reach the runner, with
// what came instead (the bridge's error message, say).
func ReadBridgeHello(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if line == BridgeHello {
		return nil
	}
	got := strings.TrimSpace(line)
	if err != nil && got == "" {
		return fmt.Errorf("%w: the bridge to the runner ended before its hello: %w", ErrUnavailable, err)
	}
	if len(got) > 200 {
		got = got[:200]
	}
	return fmt.Errorf("%w: the bridge to the runner said %q, not its hello", ErrUnavailable, got)
}

// The environment a pod gives `slipway-runner serve --listen-unix` (see
// package render): the generation from its SandboxTemplate, the sandbox's
// id (its pod's name) from the downward API.
const (
	EnvGeneration = "SLIPWAY_GENERATION"
	EnvSandboxID  = "SLIPWAY_SANDBOX_ID"
)
