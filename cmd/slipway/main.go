// Command slipway releases the software of an agent-sandbox platform through
// GitOps, with provenance. All logic lives in the library under pkg/; this is
// a thin shell over it.
package main

import (
	"os"

	"github.com/slipway-dev/slipway/cmd/slipway/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
