package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestSameFaultSameCode holds every verb to docs/cli.md's exit-code table for
// the faults that are easy to cause in-process: a missing input file, a
// missing required flag, a wrong number of arguments are usage or input
// errors (2) in every verb.
func TestSameFaultSameCode(t *testing.T) {
	const digest = "127.0.0.1:1/x@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	for _, c := range []struct {
		fault string
		args  []string
		say   string // in the error
	}{
		{"missing file", []string{"template", "build", "nope.yaml"}, "nope.yaml"},
		{"missing file", []string{"lint", "nope.yaml"}, "nope.yaml"},
		{"missing file", []string{"pin", "nope.yaml"}, "nope.yaml"},
		{"missing file", []string{"image", "runner", "nope-bin", "--push", "127.0.0.1:1/x"}, "nope-bin"},
		{"missing file", []string{"generation", "show", "nope.yaml"}, "nope.yaml"},
		{"missing file", []string{"generation", "diff", "nope1.yaml", "nope2.yaml"}, "nope1.yaml"},
		{"missing file", []string{"verify", digest, "--policy", "nope.yaml"}, "nope.yaml"},
		{"missing file", []string{"job", "show", "x", "--server", "http://127.0.0.1:1", "--token-file", "nope.token"}, "nope.token"},
		{"missing flag", []string{"verify", digest}, "--policy"},
		{"missing flag", []string{"render"}, "--repo"},
		{"missing flag", []string{"canary", "history"}, "--history"},
		{"missing flag", []string{"rollout", "status"}, "--repo"},
		{"missing flag", []string{"pool", "show"}, "--repo"},
		{"missing flag", []string{"image", "from-dir", "."}, "--push"},
		{"argument count", []string{"runs", "show"}, "arg"},
		{"argument count", []string{"version", "extra"}, "extra"},
		{"bad --output", []string{"version", "-o", "xml"}, "xml"},
	} {
		r := run(t, t.TempDir(), c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.say) {
			t.Errorf("%s: slipway %s: code %d, stderr %q; want %d naming %q", c.fault, strings.Join(c.args, " "), r.code, r.stderr, exitUsage, c.say)
		}
	}
}

// TestUnknownFlagIsUsage: an unknown flag is a usage error in every command.
func TestUnknownFlagIsUsage(t *testing.T) {
	commandTree(t, func(c *cobra.Command) {
		if c.DisableFlagParsing {
			return
		}
		r := run(t, "", argv(c, "--no-such-flag")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "unknown flag: --no-such-flag") {
			t.Errorf("%s --no-such-flag: code %d, stderr %q; want 2", c.CommandPath(), r.code, r.stderr)
		}
	})
}
