package isolate_test

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

// Run a host tool with the host's root file system read-only, no network
// and a clean environment.
func ExampleRun() {
	res, err := isolate.Run(context.Background(), isolate.Spec{
		Root:         "/",
		ReadOnlyRoot: true,
		Env:          isolate.Env{"PATH": "/usr/bin:/bin", "GREETING": "hello"},
		Argv: []string{"sh", "-c", `echo "$GREETING from $(hostname)"
echo network interfaces: $(grep -c : /proc/net/dev)
exit 3`},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exit %d\n%s", res.ExitCode, res.Output)
	// Output:
	// exit 3
	// hello from sandbox
	// network interfaces: 1
}

// Start a long-lived sandbox, wait until it is ready, and kill it.
func ExampleStart() {
	pr, pw := io.Pipe()
	p, err := isolate.Start(context.Background(), isolate.Spec{
		Root:         "/",
		ReadOnlyRoot: true,
		Env:          isolate.Env{"PATH": "/usr/bin:/bin"},
		Argv:         []string{"sh", "-c", "echo ready; exec sleep 600"},
	}, pw, pw)
	if err != nil {
		fmt.Println(err)
		return
	}
	line, _ := bufio.NewReader(pr).ReadString('\n')
	fmt.Print(line)
	_ = p.Kill()
	res, err := p.Wait()
	fmt.Println(res.Signal, err)
	// Output:
	// ready
	// killed <nil>
}
