package scan

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Rule names one check of Scan. Its value is the stable id printed in
// findings, matched by Allow and accepted by ParseAllow.
type Rule string

// The rules of Scan. Content rules read text files (see doc.go for the bounds);
// the others look only at names, modes and sizes.
const (
	// RulePrivateKey: a PEM private key header (RSA, EC, DSA, OPENSSH,
	// ENCRYPTED or PKCS#8) or a PGP private key block, in any text file.
	RulePrivateKey Rule = "private-key"
	// RuleAWSAccessKeyID: an AWS access key id (AKIA… or ASIA… and 16 more
	// upper-case letters or digits). Ids ending in EXAMPLE (AWS's documented
	// sample) are ignored.
	RuleAWSAccessKeyID Rule = "aws-access-key-id"
	// RuleAWSSecretKey: aws_secret_access_key (any case, with or without
	// underscores) assigned a 40-character secret.
	RuleAWSSecretKey Rule = "aws-secret-access-key"
	// RuleGCPServiceAccount: a JSON file with "type": "service_account" and a
	// non-empty "private_key". The line is the private_key's.
	RuleGCPServiceAccount Rule = "gcp-service-account"
	// RuleGitHubToken: ghp_, gho_, ghu_, ghs_, ghr_ tokens (36 alphanumerics)
	// and fine-grained github_pat_ tokens.
	RuleGitHubToken Rule = "github-token"
	// RuleSlackToken: xoxa-, xoxb-, xoxp-, xoxr- tokens.
	RuleSlackToken Rule = "slack-token"
	// RuleSlackWebhook: https://hooks.slack.com/services|workflows|triggers/…
	RuleSlackWebhook Rule = "slack-webhook"
	// RuleDockerAuth: a docker or podman credentials file (config.json,
	// auth.json or .dockercfg, anywhere) with a non-empty auth,
	// identitytoken, registrytoken or password under auths.
	RuleDockerAuth Rule = "docker-config-auth"
	// RuleURLPassword: scheme://user:password@host with a password that is
	// not a placeholder.
	RuleURLPassword Rule = "url-password"
	// RuleHighEntropy: in a well-known config file, a value of 16 or more
	// characters and at least 3.5 bits of Shannon entropy per character
	// assigned to a key whose name suggests a secret.
	RuleHighEntropy Rule = "high-entropy-secret"
	// RuleSetuid: a setuid or setgid regular file outside the allow-list.
	RuleSetuid Rule = "setuid-setgid"
	// RuleWorldWritableDir: a world-writable directory without the sticky bit.
	RuleWorldWritableDir Rule = "world-writable-dir"
	// RuleSSHHostKey: a leftover /etc/ssh/ssh_host_*_key; host keys are
	// per clone and come from the refresh phase.
	RuleSSHHostKey Rule = "ssh-host-key"
	// RuleMachineID: a non-empty /etc/machine-id or /var/lib/dbus/machine-id
	// (systemd's "uninitialized" marker is accepted); it is per clone too.
	RuleMachineID Rule = "machine-id"
)

// AnyRule in an Allow matches every rule.
const AnyRule Rule = "*"

// Rules returns every rule id, in a stable order.
func Rules() []Rule {
	return []Rule{
		RulePrivateKey, RuleAWSAccessKeyID, RuleAWSSecretKey, RuleGCPServiceAccount,
		RuleGitHubToken, RuleSlackToken, RuleSlackWebhook, RuleDockerAuth, RuleURLPassword,
		RuleHighEntropy, RuleSetuid, RuleWorldWritableDir, RuleSSHHostKey, RuleMachineID,
	}
}

func knownRule(r Rule) bool {
	for _, k := range Rules() {
		if k == r {
			return true
		}
	}
	return false
}

// Compiled patterns (immutable package state).
var (
	rePrivateKey  = regexp.MustCompile(`-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY|PGP PRIVATE KEY BLOCK)-----`)
	reAWSKeyID    = regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)
	reAWSSecret   = regexp.MustCompile(`(?i)secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`)
	reGitHub      = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b`)
	reSlackToken  = regexp.MustCompile(`\bxox[abpr]-[0-9]+-[0-9A-Za-z-]{10,}`)
	reSlackHook   = regexp.MustCompile(`https://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/+-]{16,})`)
	reURLPassword = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.\-]{0,31})://([^\s:/?#@'"<>\[\]]*):([^\s:/?#@'"<>]+)@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9_.\-]*)`)
	reGCPType     = regexp.MustCompile(`"type"\s*:\s*"service_account"`)
	reGCPKey      = regexp.MustCompile(`"private_key"\s*:\s*"[^"\s]`)
)

// lineRule is a content rule checked line by line. A line is matched only
// when it holds one of the triggers (cheap substring tests that every match
// contains). check returns the finding's detail and the matched secret value
// (kept only for tests, never reported), or ok false.
type lineRule struct {
	id       Rule
	triggers [][]byte
	check    func(line []byte) (detail string, value []byte, ok bool)
}

func triggers(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, t := range s {
		out[i] = []byte(t)
	}
	return out
}

// lineRules are the line-based content rules. The private key and GCP rules
// (state across lines), the docker rule (JSON) and the entropy rule (config
// files only) are handled beside these.
var lineRules = []lineRule{
	{RuleAWSAccessKeyID, triggers("AKIA", "ASIA"), checkAWSKeyID},
	{RuleAWSSecretKey, triggers("ccess", "CCESS"), checkAWSSecret},
	{RuleGitHubToken, triggers("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), checkGitHub},
	{RuleSlackToken, triggers("xox"), checkSlackToken},
	{RuleSlackWebhook, triggers("hooks.slack.com/"), checkSlackHook},
	{RuleURLPassword, triggers("://"), checkURLPassword},
}

func checkAWSKeyID(line []byte) (string, []byte, bool) {
	for _, m := range reAWSKeyID.FindAll(line, -1) {
		if !bytes.HasSuffix(m, []byte("EXAMPLE")) {
			return fmt.Sprintf("AWS access key id (%d chars)", len(m)), m, true
		}
	}
	return "", nil, false
}

func checkAWSSecret(line []byte) (string, []byte, bool) {
	for _, m := range reAWSSecret.FindAllSubmatch(line, -1) {
		if !bytes.Contains(m[1], []byte("EXAMPLEKEY")) {
			return fmt.Sprintf("AWS secret access key assigned (%d chars)", len(m[1])), m[1], true
		}
	}
	return "", nil, false
}

func checkGitHub(line []byte) (string, []byte, bool) {
	m := reGitHub.Find(line)
	if m == nil {
		return "", nil, false
	}
	return fmt.Sprintf("GitHub token (%d chars)", len(m)), m, true
}

func checkSlackToken(line []byte) (string, []byte, bool) {
	m := reSlackToken.Find(line)
	if m == nil {
		return "", nil, false
	}
	return fmt.Sprintf("Slack token (%d chars)", len(m)), m, true
}

func checkSlackHook(line []byte) (string, []byte, bool) {
	for _, m := range reSlackHook.FindAllSubmatch(line, -1) {
		// Slack's own documentation uses T00000000/B00000000/XXXXXXXX….
		if bytes.Contains(m[1], []byte("XXXXXXXX")) {
			continue
		}
		return fmt.Sprintf("Slack webhook URL (%d chars after the host)", len(m[1])), m[1], true
	}
	return "", nil, false
}

func checkURLPassword(line []byte) (string, []byte, bool) {
	if bytes.IndexByte(line, '@') < 0 {
		return "", nil, false
	}
	for _, m := range reURLPassword.FindAllSubmatch(line, -1) {
		pass, host := string(m[3]), strings.ToLower(string(m[4]))
		if placeholder(pass) || placeholderHost(host) {
			continue
		}
		return fmt.Sprintf("password in a %s URL (%d chars)", strings.ToLower(string(m[1])), len(pass)), m[3], true
	}
	return "", nil, false
}

// placeholderWord reports values documentation and templates use in place of
// a password, compared lower-cased.
func placeholderWord(v string) bool {
	switch strings.ToLower(v) {
	case "password", "passwd", "pass", "pwd", "pw", "secret", "changeme", "change_me", "redacted",
		"example", "token", "none", "null", "foo", "bar":
		return true
	}
	return false
}

// placeholder reports whether v is a reference or a stand-in rather than a
// value: empty, ${VAR} or $VAR, a template ({{ }}, {x}, %(x)s, %{x}),
// <angle> brackets, one character repeated (****, xxxx), or a placeholder word.
func placeholder(v string) bool {
	if v == "" || v[0] == '$' || strings.Contains(v, "{{") || strings.Contains(v, "${") || redactedValue(v) {
		return true
	}
	if strings.HasPrefix(v, "%(") || strings.HasPrefix(v, "%{") || v == "%s" {
		return true
	}
	if len(v) >= 2 && (v[0] == '<' && v[len(v)-1] == '>' || v[0] == '{' && v[len(v)-1] == '}') {
		return true
	}
	if strings.Count(v, v[:1]) == len(v) {
		return true
	}
	return placeholderWord(v)
}

// redactedValue reports a value Redact put in place of a secret.
func redactedValue(v string) bool {
	return strings.HasPrefix(v, "[REDACTED ") && strings.HasSuffix(v, "]") && !strings.ContainsAny(v[1:len(v)-1], "[]")
}

// placeholderHost reports documentation-only hosts (RFC 2606 and RFC 6761).
func placeholderHost(h string) bool {
	switch h {
	case "example.com", "example.org", "example.net", "host", "hostname":
		return true
	}
	for _, s := range []string{".example.com", ".example.org", ".example.net", ".example", ".test", ".invalid"} {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}
