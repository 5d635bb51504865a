package runner_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// A runner serving on a unix socket, and a client running a command
// through it. In a sandbox the runner is the slipway-runner binary and the
// socket is handed to it by the sandbox backend; here both run in-process.
func Example() {
	dir, _ := os.MkdirTemp("", "runner-example-")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "runner.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go runner.Serve(ctx, ln, runner.Config{
		Digest:     "sha256:0000000000000000000000000000000000000000000000000000000000000000",
		Generation: "g-1", SandboxID: "sb-1", Workdir: dir, Env: []string{"PATH=/usr/bin:/bin"},
	})

	c := runner.NewClient(runner.DialUnix(sock))
	id, _ := c.Identity(ctx)
	fmt.Println(id.Generation, id.SandboxID, id.ProtocolVersion)
	st, err := c.Exec(ctx, runner.ExecRequest{
		Argv:      []string{"sh", "-c", "echo hello; seq 1 1000; exit 3"},
		MaxOutput: 10,
	}, os.Stdout, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.ExitCode, st.Truncated, st.OutputBytes)
	// Output:
	// g-1 sb-1 1
	// hello
	// 1
	// 2
	// 3 true 3899
}
