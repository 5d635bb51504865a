package console

import (
	"strings"

	"github.com/slipway-dev/slipway/pkg/control/deliver"
	"github.com/slipway-dev/slipway/pkg/release/scan"
)

// Clean makes text from a workload or a record safe to show, the way the
// delivery filter does before escaping for a destination: invalid UTF-8
// replaced, terminal control sequences and bidirectional overrides
// removed (deliver.StripControl), secret-looking values replaced by
// "[REDACTED rule]" (scan.Redact). Markup is left to html/template, which
// escapes it.
func Clean(s string) string {
	s = deliver.StripControl(strings.ToValidUTF8(s, "\uFFFD"))
	red, _ := scan.Redact([]byte(s))
	return string(red)
}
