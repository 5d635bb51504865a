package deliver

import (
	"strings"
	"unicode/utf8"

	"github.com/slipway-dev/slipway/pkg/release/scan"
)

// Limits bound a message's text.
type Limits struct {
	// MaxBytes and MaxLines bound the text (defaults 4000 and 50).
	MaxBytes, MaxLines int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 4000
	}
	if l.MaxLines <= 0 {
		l.MaxLines = 50
	}
	return l
}

// Text is a filtered text.
type Text struct {
	// Text is what the message carries: cleaned, redacted, bounded and
	// escaped.
	Text string
	// Full is the cleaned and redacted text before truncation and escaping,
	// set only when Truncated: what an artifact holds.
	Full         string
	Truncated    bool
	DroppedBytes int
	DroppedLines int
	Redactions   []scan.Redaction
}

// Filter makes raw safe to deliver (see the package doc for the steps).
func Filter(raw []byte, lim Limits) Text {
	lim = lim.withDefaults()
	s := StripControl(strings.ToValidUTF8(string(raw), "\uFFFD"))
	red, rs := scan.Redact([]byte(s))
	full := string(red)
	head, db, dl := Truncate(full, lim.MaxBytes, lim.MaxLines)
	t := Text{Text: EscapeMarkup(head), DroppedBytes: db, DroppedLines: dl, Redactions: rs}
	if db > 0 || dl > 0 {
		t.Truncated, t.Full = true, full
	}
	return t
}

// StripControl removes terminal control: ESC sequences (CSI, OSC, DCS,
// SOS, PM, APC and two-byte escapes), C0 controls but tab and newline, DEL,
// C1 controls and bidirectional overrides; \r\n and a lone \r become \n.
// s must be valid UTF-8.
func StripControl(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
			continue
		case c == '\r':
			b.WriteByte('\n')
			i++
			if i < len(s) && s[i] == '\n' {
				i++
			}
			continue
		case c == '\n' || c == '\t':
			b.WriteByte(c)
			i++
			continue
		case c < 0x20 || c == 0x7f:
			i++
			continue
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// skipEscape returns the index after the escape sequence at s[i] (ESC).
func skipEscape(s string, i int) int {
	i++
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[': // CSI: parameters and intermediates, then a final byte 0x40-0x7e
		for i++; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return i
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: until BEL or ESC \
		for i++; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	}
	return i + 1 // a two-byte escape (ESC c, ESC 7, ESC ( ...)
}

// Truncate keeps the first maxLines lines of s and then its first
// maxBytes bytes (cut on a character boundary), and says how many bytes
// and lines it dropped (a line cut in the middle counts as dropped).
func Truncate(s string, maxBytes, maxLines int) (head string, droppedBytes, droppedLines int) {
	head = s
	if n := strings.Count(s, "\n"); n >= maxLines {
		idx := 0
		for range maxLines {
			idx += strings.IndexByte(head[idx:], '\n') + 1
		}
		head = s[:idx]
	}
	if len(head) > maxBytes {
		cut := maxBytes
		for cut > 0 && !utf8.RuneStart(head[cut]) {
			cut--
		}
		head = head[:cut]
	}
	if len(head) == len(s) {
		return s, 0, 0
	}
	rest := s[len(head):]
	droppedLines = strings.Count(rest, "\n")
	if !strings.HasSuffix(rest, "\n") {
		droppedLines++
	}
	return head, len(rest), droppedLines
}

// EscapeMarkup escapes a destination's markup: &, < and > as entities
// (Slack's control sequences <!channel>, <@U123>, <#C1>, <url|text> and
// HTML lose their meaning) and a zero-width space after an @ that starts
// a word (@channel, @here, @everyone, @alice mention nobody).
func EscapeMarkup(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '@':
			b.WriteByte('@')
			if i+1 < len(s) && wordByte(s[i+1]) && (i == 0 || !wordByte(s[i-1])) {
				b.WriteString("\u200b")
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func wordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= utf8.RuneSelf
}
