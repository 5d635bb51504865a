package scan

import (
	"bytes"
	"fmt"
	"math"
	"path"
	"strings"
)

// Bounds of RuleHighEntropy. A random 16-character alphanumeric string has
// about 3.7 bits per character; English words and repeated characters stay
// well below 3.5, so "password: changeme" (and changemechangeme) is not
// flagged, while a random token, hex or base64 key of 16 or more characters
// nearly always is.
const (
	// MinSecretLength is the shortest value RuleHighEntropy considers.
	MinSecretLength = 16
	// MinEntropy is the Shannon entropy, in bits per character, at or above
	// which RuleHighEntropy flags a value.
	MinEntropy = 3.5
)

// configFile reports whether a base name is one of the well-known config
// files RuleHighEntropy reads.
func configFile(name string) bool {
	switch name {
	case ".env", ".npmrc", ".pypirc", "credentials", ".pgpass", ".my.cnf":
		return true
	}
	if strings.HasPrefix(name, ".env.") {
		return true
	}
	switch path.Ext(name) {
	case ".env", ".ini", ".cfg", ".conf", ".cnf", ".toml", ".yaml", ".yml", ".properties":
		return true
	}
	return false
}

// secretKey reports whether a key's name suggests that its value is a secret.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, w := range []string{"password", "passwd", "secret", "token", "api_key", "apikey", "api-key",
		"access_key", "accesskey", "access-key", "private_key", "privatekey", "private-key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	// "auth" and "pass" only as whole words: _auth, basic_auth, db_pass, but
	// not author or passthrough.
	for _, seg := range strings.FieldsFunc(k, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) {
		if seg == "auth" || seg == "pass" {
			return true
		}
	}
	return false
}

// parseKV splits a config line into key and value: key = value, key: value,
// "key": "value", export KEY=value, - key: value. Quoted values are unquoted;
// an unquoted value ends at the first blank (which drops inline comments).
func parseKV(line []byte) (key, val []byte, ok bool) {
	s := bytes.TrimSpace(line)
	if len(s) < 3 || s[0] == '#' || s[0] == ';' || s[0] == '[' {
		return nil, nil, false
	}
	s = bytes.TrimPrefix(s, []byte("- "))
	s = bytes.TrimPrefix(s, []byte("export "))
	sep := -1
	for i := 0; i < len(s) && sep < 0; i++ {
		switch s[i] {
		case '=':
			sep = i
		case ':':
			// key: value, but not the ':' inside //registry/:_authToken=…
			if i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '"' || s[i+1] == '\'' {
				sep = i
			}
		}
	}
	if sep <= 0 {
		return nil, nil, false
	}
	key = bytes.Trim(bytes.TrimSpace(s[:sep]), `"'`)
	if len(key) == 0 || key[0] == '-' || bytes.ContainsAny(key, " \t") { // --flag=value is a command line
		return nil, nil, false
	}
	v := bytes.TrimSpace(s[sep+1:])
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		end := bytes.IndexByte(v[1:], v[0])
		if end < 0 {
			return nil, nil, false // a multi-line string: not a single value
		}
		v = v[1 : 1+end]
	} else {
		if i := bytes.IndexAny(v, " \t"); i >= 0 {
			v = v[:i]
		}
		v = bytes.TrimRight(v, ",")
	}
	return key, v, len(v) > 0
}

// checkConfigLine is RuleHighEntropy on one line of a config file.
func checkConfigLine(line []byte) (string, []byte, bool) {
	if len(line) < MinSecretLength+2 {
		return "", nil, false
	}
	key, v, ok := parseKV(line)
	if !ok || len(v) < MinSecretLength || !secretKey(string(key)) {
		return "", nil, false
	}
	h, ok := secretLike(string(v))
	if !ok {
		return "", nil, false
	}
	// The key is left out on purpose: it comes from the file and could itself
	// hold something secret; the line number locates it.
	return fmt.Sprintf("secret-named key assigned %d chars at %.1f bits/char", len(v), h), v, true
}

// secretLike reports whether a value looks like a literal secret, with its
// entropy: long enough, not a placeholder, a URL (RuleURLPassword covers
// those), a path, an encrypted envelope or a documented sample (holding
// EXAMPLE, as AWS's do), at least two of lower case, upper
// case and digits, and entropy at or above MinEntropy.
func secretLike(v string) (float64, bool) {
	if len(v) < MinSecretLength || placeholder(v) || strings.Contains(v, "://") || strings.Contains(v, "EXAMPLE") {
		return 0, false
	}
	if v[0] == '/' || v[0] == '~' || v[0] == '!' || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "ENC[") {
		return 0, false
	}
	var lower, upper, digit int
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z':
			lower = 1
		case c >= 'A' && c <= 'Z':
			upper = 1
		case c >= '0' && c <= '9':
			digit = 1
		}
	}
	if lower+upper+digit < 2 {
		return 0, false
	}
	h := shannon(v)
	return h, h >= MinEntropy
}

// shannon is the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
