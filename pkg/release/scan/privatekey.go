package scan

import (
	"bytes"
	"fmt"
)

// RulePrivateKey needs more than its header: a header alone is what parsers,
// docs and MIME tables carry ("-----BEGIN RSA PRIVATE KEY-----" as a string
// constant). A header counts when key material follows it: on the same line
// after an escaped newline (a key inside a JSON or source string), or on the
// next non-blank line when nothing but quotes or a line continuation follows
// the header. Material is 16 or more base64 characters, or a PEM or PGP armor
// header (Proc-Type:, Version:, Comment:, Hash:, Charset:).

// privateKey checks line n for key headers; a header that ends its line
// waits for the next non-blank line (s.pendKey). cut says the line goes on in
// the next piece of a long line, where the overlap shows the header again.
func (s *contentScanner) privateKey(n int, line []byte, cut bool) {
	for _, m := range rePrivateKey.FindAllSubmatchIndex(line, -1) {
		detail := fmt.Sprintf("%s header followed by key material", line[m[2]:m[3]])
		rest := line[m[1]:]
		if r, ok := cutEscapedNewline(rest); ok {
			if keyMaterial(r) {
				s.add(RulePrivateKey, n, detail, nil)
				return
			}
			rest = r
		}
		if lineEnd(rest) && !cut {
			s.pendKey, s.pendDetail = n, detail
		}
	}
}

// resolveKey looks at the first line after a pending header; blank lines
// keep it waiting.
func (s *contentScanner) resolveKey(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if keyMaterial(line) {
		s.add(RulePrivateKey, s.pendKey, s.pendDetail, nil)
	}
	s.pendKey, s.pendDetail = 0, ""
}

// cutEscapedNewline strips a leading \n or \r\n escape.
func cutEscapedNewline(b []byte) ([]byte, bool) {
	if r, ok := bytes.CutPrefix(b, []byte(`\r\n`)); ok {
		return r, true
	}
	return bytes.CutPrefix(b, []byte(`\n`))
}

// lineEnd reports whether b holds only blanks, quotes and line
// continuations: the header ends its line and the key goes on below.
func lineEnd(b []byte) bool {
	if r, ok := cutEscapedNewline(b); ok {
		b = r
	}
	return len(bytes.Trim(b, " \t\r\"'`+\\")) == 0
}

var armorHeaders = [][]byte{[]byte("Proc-Type:"), []byte("Version:"), []byte("Comment:"), []byte("Hash:"), []byte("Charset:")}

// keyMaterial reports whether b starts (after blanks and quotes) with base64
// key material or an armor header.
func keyMaterial(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\"'`")
	for _, h := range armorHeaders {
		if bytes.HasPrefix(b, h) {
			return true
		}
	}
	n := 0
	for n < len(b) && base64Char(b[n]) {
		n++
	}
	return n >= 16
}

func base64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}
