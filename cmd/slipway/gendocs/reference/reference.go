// Package reference renders the slipway command tree as Markdown pages, one
// per command, stable from one run to the next: no dates, no values of the
// environment the generator runs in. It is for cmd/slipway/gendocs and its
// staleness test, not for the slipway binary.
package reference

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/cmd/slipway/cli"
)

// Regenerate is the command that rewrites the pages.
const Regenerate = "make docs (go run ./cmd/slipway/gendocs)"

const header = "<!-- Generated from the command tree by " + Regenerate + ": do not edit. -->\n\n"

// Write replaces the Markdown pages in dir with those of the command tree.
func Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	root := cli.Command()
	stable(root)
	return doc.GenMarkdownTreeCustom(root, dir,
		func(string) string { return header },
		func(name string) string { return name })
}

// stable drops what would change a page from one run to the next: cobra's
// dated footer, and defaults read from the environment (a flag whose default
// came from SLIPWAY_* or the home directory shows no default).
func stable(c *cobra.Command) {
	c.DisableAutoGenTag = true
	home, _ := os.UserHomeDir()
	c.LocalFlags().VisitAll(func(f *pflag.Flag) { scrub(f, home) })
	c.PersistentFlags().VisitAll(func(f *pflag.Flag) { scrub(f, home) })
	for _, sub := range c.Commands() {
		stable(sub)
	}
}

func scrub(f *pflag.Flag, home string) {
	if f.DefValue == "" {
		return
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if v != "" && strings.HasPrefix(k, "SLIPWAY_") && strings.Contains(f.DefValue, v) {
			f.DefValue = ""
			return
		}
	}
	if home != "" && strings.Contains(f.DefValue, home) {
		f.DefValue = strings.ReplaceAll(f.DefValue, home, "$HOME")
	}
}
