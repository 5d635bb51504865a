package scan

import (
	"bytes"
	"regexp"
)

// Redaction is one value Redact replaced: its rule and the line (from 1)
// of the text it was on. Like a Finding it never holds the value.
type Redaction struct {
	Rule Rule `json:"rule"`
	Line int  `json:"line"`
}

// RedactMarker returns what replaces a value of rule r: "[REDACTED r]".
// It holds a blank, so no rule matches it again.
func RedactMarker(r Rule) []byte { return []byte("[REDACTED " + string(r) + "]") }

// maxPerLine bounds the replacements of one rule on one line.
const maxPerLine = 64

var (
	// rePEMBlock is a private key block: its header and everything up to
	// its footer, or to the end of the text when the footer is missing (a
	// key cut by truncation is still a key).
	rePEMBlock = regexp.MustCompile(`-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY|PGP PRIVATE KEY BLOCK)-----(?s:.*?)(?:-----END (?:(?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY|PGP PRIVATE KEY BLOCK)-----|\z)`)
	// reJSONCredential is a docker-style credential field in JSON text.
	reJSONCredential = regexp.MustCompile(`"(?:auth|identitytoken|registrytoken|password)"\s*:\s*"([^"\\]{1,1000})"`)
)

// Redact returns text with every value the content rules of Scan would
// refuse to freeze replaced by RedactMarker, and what it replaced. It is
// for text that leaves Slipway (a run's output delivered to a product), so
// it is stricter than Scan where Scan needs a file's context:
//
//   - a private key block is replaced from its header through its footer
//     (or the end of text) whether or not key material follows;
//   - the entropy rule (high-entropy-secret) applies to every line, not
//     only to lines of well-known config files;
//   - the docker rule applies to any "auth", "identitytoken",
//     "registrytoken" or "password" JSON string, in any text.
//
// Placeholders stay, as in Scan. A secret split across two calls (two
// chunks of one line) is not seen: callers redact whole messages.
func Redact(text []byte) ([]byte, []Redaction) {
	var out []Redaction
	lineAt := func(b []byte, off int) int { return 1 + bytes.Count(b[:off], []byte{'\n'}) }
	if bytes.Contains(text, trigPrivateKey) {
		var b bytes.Buffer
		last := 0
		for _, m := range rePEMBlock.FindAllIndex(text, -1) {
			out = append(out, Redaction{Rule: RulePrivateKey, Line: lineAt(text, m[0])})
			b.Write(text[last:m[0]])
			b.Write(RedactMarker(RulePrivateKey))
			last = m[1]
		}
		if last > 0 {
			b.Write(text[last:])
			text = b.Bytes()
		}
	}
	lines := bytes.SplitAfter(text, []byte{'\n'})
	var res bytes.Buffer
	res.Grow(len(text))
	for i, l := range lines {
		n := i + 1
		for _, r := range lineRules {
			if !hasAny(l, r.triggers) {
				continue
			}
			l = replaceAll(l, r.id, r.check, n, &out)
		}
		l = replaceAll(l, RuleHighEntropy, checkConfigLine, n, &out)
		if bytes.Contains(l, []byte(`"`)) {
			l = replaceAll(l, RuleDockerAuth, checkJSONCredential, n, &out)
		}
		res.Write(l)
	}
	return res.Bytes(), out
}

// replaceAll replaces, in line n, each value check finds with the marker
// of rule id, until check finds none (at most maxPerLine times).
func replaceAll(l []byte, id Rule, check func([]byte) (string, []byte, bool), n int, out *[]Redaction) []byte {
	for range maxPerLine {
		_, v, ok := check(l)
		if !ok || len(v) == 0 || bytes.Contains(v, []byte("[REDACTED ")) {
			return l
		}
		i := bytes.Index(l, v)
		if i < 0 {
			return l
		}
		l = append(append(append([]byte(nil), l[:i]...), RedactMarker(id)...), l[i+len(v):]...)
		*out = append(*out, Redaction{Rule: id, Line: n})
	}
	return l
}

// checkJSONCredential finds a credential JSON string that is not a
// placeholder.
func checkJSONCredential(l []byte) (string, []byte, bool) {
	for _, m := range reJSONCredential.FindAllSubmatch(l, -1) {
		if !placeholder(string(m[1])) {
			return "credential field", m[1], true
		}
	}
	return "", nil, false
}
