package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Command returns the command tree Main runs, wired to no input and no
// output, for programs that read the tree (cmd/slipway/gendocs writes the
// reference pages from it). It runs nothing.
func Command() *cobra.Command {
	return NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
}
