// Command tiny is built by the tests into a fixture root filesystem, so that syft finds a Go binary
// with one dependency module in it.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

func main() {
	name := pflag.String("name", "world", "who to greet")
	pflag.Parse()
	fmt.Fprintf(os.Stdout, "hello, %s\n", *name)
}
