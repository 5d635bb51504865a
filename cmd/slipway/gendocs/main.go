// Command gendocs writes the slipway CLI reference, one Markdown page per
// command, from the command tree: `make docs` runs it into docs/cli, and a
// test fails when those pages are stale. It is a program of its own rather
// than a hidden verb so that cobra's doc package stays out of the shipped
// binary.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slipway-dev/slipway/cmd/slipway/gendocs/reference"
)

func main() {
	dir := flag.String("dir", "docs/cli", "write the pages here (its *.md files are replaced)")
	flag.Parse()
	if err := reference.Write(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}
