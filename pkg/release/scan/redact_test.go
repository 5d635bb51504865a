package scan

import (
	"strings"
	"testing"
)

// TestRedactLeavesNothingScanRefuses: every planted secret of the rule
// cases, redacted, leaves a tree Scan's content rules pass, and the values
// are gone from the text.
func TestRedactLeavesNothingScanRefuses(t *testing.T) {
	content := map[Rule]bool{RulePrivateKey: true, RuleAWSAccessKeyID: true, RuleAWSSecretKey: true, RuleGitHubToken: true,
		RuleSlackToken: true, RuleSlackWebhook: true, RuleDockerAuth: true, RuleURLPassword: true, RuleHighEntropy: true}
	for _, c := range ruleCases() {
		redacted := map[string]file{}
		total := 0
		for p, f := range c.files {
			if f.content == "" {
				redacted[p] = f
				continue
			}
			out, rs := Redact([]byte(f.content))
			total += len(rs)
			redacted[p] = file{content: string(out), mode: f.mode}
			for _, s := range c.secrets {
				// the GCP key id and the docker password (inside base64) are
				// no findings of Scan either
				if strings.Contains(string(out), s) && strings.Contains(f.content, s) && s != c.secrets[len(c.secrets)-1] && c.name != "docker config auths" {
					t.Errorf("%s: %s: a secret survived redaction", c.name, p)
				}
			}
		}
		if len(c.secrets) > 0 && total == 0 {
			t.Errorf("%s: nothing redacted", c.name)
		}
		rep, _ := scanRoot(t, plant(t, redacted))
		for _, f := range rep.Findings {
			if content[f.Rule] {
				t.Errorf("%s: after redaction Scan still refuses %s", c.name, f)
			}
		}
	}
}

func TestRedactMarkersAndPlaceholders(t *testing.T) {
	tok := join("gh", "p_", fake(7, alnum, 36))
	in := "token " + tok + " and " + tok + "\nAPI_TOKEN=${TOKEN}\npassword: changeme\n" +
		pemBlock("RSA PRIVATE KEY", fake(1, base64Chars, 64)) + "after\n-----BEGIN PRIVATE KEY-----\n" + fake(2, base64Chars, 64)
	out, rs := Redact([]byte(in))
	want := "token [REDACTED github-token] and [REDACTED github-token]\nAPI_TOKEN=${TOKEN}\npassword: changeme\n" +
		"[REDACTED private-key]\nafter\n[REDACTED private-key]"
	if string(out) != want {
		t.Errorf("Redact:\n%q\nwant\n%q", out, want)
	}
	if len(rs) != 4 || rs[0].Rule != RulePrivateKey || rs[0].Line != 4 || rs[2].Rule != RuleGitHubToken || rs[2].Line != 1 {
		t.Errorf("redactions %+v", rs)
	}
	// a redacted text redacts to itself
	again, rs2 := Redact(out)
	if string(again) != string(out) || len(rs2) != 0 {
		t.Errorf("second Redact changed %q to %q (%v)", out, again, rs2)
	}
}
