package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample walks the tree: every command has an Example,
// each example line that runs slipway names a command that exists and only
// flags it has, and every entry of examples names a command.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := Command()
	used := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		used[strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "slipway"), " ")] = true
		if c.Name() != "help" {
			if c.Example == "" {
				t.Errorf("%s has no Example", c.CommandPath())
			}
			checkExample(t, root, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for k := range examples {
		if !used[k] {
			t.Errorf("examples[%q] names no command", k)
		}
	}
}

// checkExample finds the command each `slipway ...` line of c's Example runs
// and checks its long flags exist there.
func checkExample(t *testing.T, root, c *cobra.Command) {
	t.Helper()
	text := strings.ReplaceAll(c.Example, "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "slipway "); i < 0 || strings.HasPrefix(line, "#") {
			continue
		} else {
			line = line[i+len("slipway "):]
		}
		for _, cut := range []string{" | ", " > ", " ; ", ")"} {
			if i := strings.Index(line, cut); i >= 0 {
				line = line[:i]
			}
		}
		args := strings.Fields(line)
		cmd, rest, err := root.Find(args)
		if err != nil {
			t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			continue
		}
		for _, a := range rest {
			if a == "--" {
				break
			}
			if !strings.HasPrefix(a, "--") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if cmd.Flag(name) == nil {
				t.Errorf("%s: example %q: %s has no flag --%s", c.CommandPath(), line, cmd.CommandPath(), name)
			}
		}
	}
}

func TestHelpIsGrouped(t *testing.T) {
	r := run(t, "", "--help")
	for _, g := range commandGroups {
		if !strings.Contains(r.stdout, g.group.Title) {
			t.Errorf("help has no %q", g.group.Title)
		}
	}
	if strings.Contains(r.stdout, "Additional Commands:") {
		t.Errorf("a command is in no group:\n%s", r.stdout)
	}
}
