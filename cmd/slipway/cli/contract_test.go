package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandTree walks the command tree the way Main builds it.
func commandTree(t *testing.T, fn func(c *cobra.Command)) {
	t.Helper()
	root := NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		fn(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// argv is a command's path without the leading "slipway".
func argv(c *cobra.Command, more ...string) []string {
	return append(strings.Fields(c.CommandPath())[1:], more...)
}

// typo swaps a name's last two letters, or doubles the last one: a slip of
// the fingers, close enough for a suggestion.
func typo(name string) string {
	b := []byte(name)
	if n := len(b); n >= 2 && b[n-1] != b[n-2] {
		b[n-1], b[n-2] = b[n-2], b[n-1]
		return string(b)
	}
	return name + name[len(name)-1:]
}

// TestUnknownSubcommandIsUsage: for every command with sub-commands, an
// unknown sub-verb exits 2 naming it (and the close one when there is one);
// the parent alone prints its help and exits 0.
func TestUnknownSubcommandIsUsage(t *testing.T) {
	n := 0
	commandTree(t, func(c *cobra.Command) {
		if !c.HasSubCommands() {
			return
		}
		n++
		path := c.CommandPath()
		r := run(t, "", argv(c, "nosuchverb")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "nosuchverb" for "`+path+`"`) {
			t.Errorf("%s nosuchverb: code %d, stderr %q; want 2 and an unknown command", path, r.code, r.stderr)
		}
		var sub *cobra.Command
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() && s.Name() != "help" {
				sub = s
				break
			}
		}
		if sub != nil {
			bad := typo(sub.Name())
			r = run(t, "", argv(c, bad)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "did you mean ") || !strings.Contains(r.stderr, `"`+sub.Name()+`"`) {
				t.Errorf("%s %s: code %d, stderr %q; want 2 and a suggestion of %q", path, bad, r.code, r.stderr, sub.Name())
			}
		}
		if c.Annotations[annotationHelpOnly] == "" {
			return // a parent that runs (canary): its flags decide
		}
		r = run(t, "", argv(c)...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%s alone: code %d, stdout %q; want its help and 0", path, r.code, r.stdout)
		}
	})
	if n < 10 {
		t.Fatalf("walked %d parent commands: the tree is not what Main builds", n)
	}
}

func TestUnknownSubcommandMessage(t *testing.T) {
	r := run(t, "", "rollout", "stauts")
	want := `slipway: unknown command "stauts" for "slipway rollout"; did you mean "status"?` + "\n"
	if r.code != exitUsage || r.stderr != want {
		t.Fatalf("code %d stderr %q, want 2 and %q", r.code, r.stderr, want)
	}
}
