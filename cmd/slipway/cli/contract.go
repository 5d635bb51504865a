package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/internal/spelling"
	"github.com/spf13/cobra"
)

// annotationHelpOnly marks a parent command that does nothing but print its
// help when run alone.
const annotationHelpOnly = "slipway.dev/help-only"

// strictSubcommands makes every command that has sub-commands refuse a first
// argument that names none of them: exit 2 with a suggestion, never the
// parent's help with exit 0 (a typo in CI must not pass green). A parent that
// does nothing itself prints its help when run alone and exits 0, as kubectl's
// do; a parent that runs (canary) keeps its own positional arguments.
func strictSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictSubcommands(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	own := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 || (own != nil && own(cmd, args) == nil) {
			return nil
		}
		return usage(unknownCommand(cmd, args[0]))
	}
	if !c.Runnable() {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[annotationHelpOnly] = "true"
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// unknownCommand says which word is not a sub-command of cmd and, when some
// are close, the closest.
func unknownCommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	if s := suggest(cmd, arg); len(s) > 0 {
		q := make([]string, len(s))
		for i, name := range s {
			q[i] = fmt.Sprintf("%q", name)
		}
		return errors.New(msg + "; did you mean " + strings.Join(q, " or ") + "?")
	}
	return fmt.Errorf("%s; run '%s --help' for its commands", msg, cmd.CommandPath())
}

// suggest returns the available sub-commands of cmd closest to arg: those at
// the least edit distance (at most 2, a transposition counting 1), else those
// arg is a prefix of, else those whose SuggestFor names arg.
func suggest(cmd *cobra.Command, arg string) []string {
	a := strings.ToLower(arg)
	best, bestD := []string(nil), 3
	var prefix, named []string
	for _, sub := range cmd.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		n := strings.ToLower(sub.Name())
		switch d := spelling.Distance(a, n); {
		case d < bestD:
			best, bestD = []string{sub.Name()}, d
		case d == bestD:
			best = append(best, sub.Name())
		}
		if strings.HasPrefix(n, a) {
			prefix = append(prefix, sub.Name())
		}
		for _, s := range sub.SuggestFor {
			if strings.EqualFold(s, arg) {
				named = append(named, sub.Name())
			}
		}
	}
	switch {
	case len(best) > 0:
		return best
	case len(prefix) > 0:
		return prefix
	}
	return named
}

// strictHelp makes `slipway help WORD...` refuse a word that names no
// command, as the command itself would (exit 2 and the closest), where
// cobra prints "Unknown help topic" and exits 0.
func strictHelp(root *cobra.Command) {
	for _, h := range root.Commands() {
		if h.Name() != "help" {
			continue
		}
		show := h.Run
		h.Run = nil
		h.RunE = func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			switch {
			case err != nil || cmd == nil:
				return usage(unknownCommand(root, args[0]))
			case len(rest) > 0:
				return usage(unknownCommand(cmd, rest[0]))
			}
			show(c, args)
			return nil
		}
	}
}
