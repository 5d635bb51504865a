package scan

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

type ruleCase struct {
	name    string
	files   map[string]file
	want    []Finding // Rule, Path, Line only
	secrets []string  // must appear nowhere in the report
}

func f(r Rule, p string, line int) Finding { return Finding{Rule: r, Path: p, Line: line} }

// ruleCases plants one or more secrets per rule, each built at run time.
func ruleCases() []ruleCase {
	b1, b2, b3 := fake(1, base64Chars, 64), fake(2, base64Chars, 64), fake(3, base64Chars, 40)
	awsID := join("AK", "IA", fake(4, upperDigits, 16))
	stsID := join("AS", "IA", fake(5, upperDigits, 16))
	awsSecret := fake(6, base64Chars, 40)
	ghp := join("gh", "p_", fake(7, alnum, 36))
	gho := join("gh", "o_", fake(8, alnum, 36))
	pat := join("github", "_pat_", fake(9, alnum, 22), "_", fake(10, alnum+alnum, 59))
	slack := join("xo", "xb-", fake(11, digits, 10), "1-", fake(12, digits, 10), "23-", fake(13, alnum, 24))
	hook := join("https://hooks.", "slack.com/services/T", fake(14, upperDigits, 8), "/B", fake(15, upperDigits, 8), "/", fake(16, alnum, 24))
	dockerPass := fake(17, alnum, 20)
	dockerAuth := base64.StdEncoding.EncodeToString([]byte("ci:" + dockerPass))
	idToken := fake(18, alnum, 48)
	urlPass, redisPass := fake(19, alnum, 18), fake(20, alnum, 12)
	envTok, yamlPass, npmTok, tomlSecret := fake(21, alnum, 24), fake(22, alnum, 20), fake(23, alnum, 36), fake(24, "0123456789abcdef", 32)
	keyID := fake(25, "0123456789abcdef", 40)
	machineID := fake(26, "0123456789abcdef", 32)
	escaped := func(body string) string {
		return `-----BEGIN PRIVATE KEY-----\n` + body + `\n-----END PRIVATE KEY-----\n`
	}
	return []ruleCase{{
		name: "private-key PEM blocks",
		files: map[string]file{
			"/opt/app/server.key":          {content: "# deploy key\n" + pemBlock("RSA PRIVATE KEY", b1, b2, b3)},
			"/home/dev/.ssh/id_ed25519":    {content: pemBlock("OPENSSH PRIVATE KEY", b2, b3), mode: 0o600},
			"/etc/ssl/private/legacy.pem":  {content: pemBlock("RSA PRIVATE KEY", "Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,00", "", b1)},
			"/etc/ssl/private/pkcs8.pem":   {content: "\n\n" + pemBlock("ENCRYPTED PRIVATE KEY", b3)},
			"/srv/ec/main.go":              {content: "package main\n\nvar key = []byte(`" + pemBlock("EC PRIVATE KEY", b1) + "`)\n"},
			"/srv/ec/keys.py":              {content: "KEY = (\n    \"-----BEGIN DSA PRIVATE KEY-----\\n\"\n    \"" + b2 + "\\n\"\n)\n"},
			"/root/.gnupg/secret.asc":      {content: pemBlock("PGP PRIVATE KEY BLOCK", "Version: GnuPG v2", "", b1, b2)},
			"/srv/tls.json":                {content: "{\n  \"key\": \"" + escaped(b1) + "\"\n}\n"},
			"/usr/share/doc/x/armored.txt": {content: pemBlock("PGP PRIVATE KEY BLOCK", "", b3)},
		},
		want: []Finding{
			f(RulePrivateKey, "/etc/ssl/private/legacy.pem", 1), f(RulePrivateKey, "/etc/ssl/private/pkcs8.pem", 3),
			f(RulePrivateKey, "/home/dev/.ssh/id_ed25519", 1), f(RulePrivateKey, "/opt/app/server.key", 2),
			f(RulePrivateKey, "/root/.gnupg/secret.asc", 1), f(RulePrivateKey, "/srv/ec/keys.py", 2),
			f(RulePrivateKey, "/srv/ec/main.go", 3), f(RulePrivateKey, "/srv/tls.json", 2),
			f(RulePrivateKey, "/usr/share/doc/x/armored.txt", 1),
		},
		secrets: []string{b1, b2, b3},
	}, {
		name: "aws keys",
		files: map[string]file{
			"/root/.aws/credentials":   {content: "[default]\naws_access_key_id = " + awsID + "\naws_secret_access_key = " + awsSecret + "\n"},
			"/etc/profile.d/aws.sh":    {content: "# ci\nexport AWS_ACCESS_KEY_ID=" + stsID + "\nexport AWS_SECRET_ACCESS_KEY=\"" + awsSecret + "\"\n"},
			"/opt/tool/cache/sts.json": {content: `{"Credentials": {"AccessKeyId": "` + stsID + `", "SecretAccessKey": "` + awsSecret + `"}}`},
		},
		want: []Finding{
			f(RuleAWSAccessKeyID, "/etc/profile.d/aws.sh", 2), f(RuleAWSSecretKey, "/etc/profile.d/aws.sh", 3),
			f(RuleAWSAccessKeyID, "/opt/tool/cache/sts.json", 1), f(RuleAWSSecretKey, "/opt/tool/cache/sts.json", 1),
			// credentials is a well-known config file: the entropy rule sees both values too.
			f(RuleAWSAccessKeyID, "/root/.aws/credentials", 2), f(RuleHighEntropy, "/root/.aws/credentials", 2),
			f(RuleAWSSecretKey, "/root/.aws/credentials", 3), f(RuleHighEntropy, "/root/.aws/credentials", 3),
		},
		secrets: []string{awsID, stsID, awsSecret},
	}, {
		name: "gcp service account",
		files: map[string]file{
			"/opt/sa.json": {content: "{\n  \"type\": \"service_account\",\n  \"project_id\": \"demo\",\n  \"private_key_id\": \"" + keyID +
				"\",\n  \"private_key\": \"" + escaped(b1) + "\",\n  \"client_email\": \"ci@demo.iam.gserviceaccount.com\"\n}\n"},
		},
		want:    []Finding{f(RuleGCPServiceAccount, "/opt/sa.json", 5), f(RulePrivateKey, "/opt/sa.json", 5)},
		secrets: []string{b1, keyID},
	}, {
		name: "github tokens",
		files: map[string]file{
			"/home/dev/.config/gh/hosts.yml": {content: "github.com:\n    oauth_token: " + gho + "\n    user: dev\n"},
			"/opt/ci/run.sh":                 {content: "curl -H \"Authorization: token " + pat + "\" https://api.github.com/user\n"},
			"/opt/ci/notes.txt":              {content: "old token\n" + ghp + "\n"},
		},
		want: []Finding{
			f(RuleGitHubToken, "/home/dev/.config/gh/hosts.yml", 2), f(RuleHighEntropy, "/home/dev/.config/gh/hosts.yml", 2),
			f(RuleGitHubToken, "/opt/ci/notes.txt", 2), f(RuleGitHubToken, "/opt/ci/run.sh", 1),
		},
		secrets: []string{gho, pat, ghp},
	}, {
		name: "slack",
		files: map[string]file{
			"/opt/bot/bot.py":    {content: "import os\nSLACK = \"" + slack + "\"\n"},
			"/opt/bot/notify.sh": {content: "curl -X POST " + hook + " -d @msg.json\n"},
		},
		want:    []Finding{f(RuleSlackToken, "/opt/bot/bot.py", 2), f(RuleSlackWebhook, "/opt/bot/notify.sh", 1)},
		secrets: []string{slack, hook[len(hook)-24:]},
	}, {
		name: "docker config auths",
		files: map[string]file{
			"/root/.docker/config.json":   {content: "{\n  \"auths\": {\n    \"registry.example.net\": {\n      \"auth\": \"" + dockerAuth + "\"\n    }\n  }\n}\n"},
			"/run/containers/0/auth.json": {content: `{"auths": {"quay.io": {"identitytoken": "` + idToken + `"}}}`},
			"/home/old/.dockercfg":        {content: `{"https://index.docker.io/v1/": {"auth": "` + dockerAuth + `", "email": "x@y.z"}}`},
		},
		want: []Finding{
			f(RuleDockerAuth, "/home/old/.dockercfg", 1), f(RuleDockerAuth, "/root/.docker/config.json", 4),
			f(RuleDockerAuth, "/run/containers/0/auth.json", 1),
		},
		secrets: []string{dockerAuth, dockerPass, idToken},
	}, {
		name: "passwords in urls",
		files: map[string]file{
			"/etc/app/app.conf": {content: "[db]\ndatabase_url = postgres://app:" + urlPass + "@db.internal:5432/app\n"},
			"/srv/cache.py":     {content: "# cache\n\nREDIS = 'redis://:" + redisPass + "@cache:6379/0'\n"},
		},
		want:    []Finding{f(RuleURLPassword, "/etc/app/app.conf", 2), f(RuleURLPassword, "/srv/cache.py", 3)},
		secrets: []string{urlPass, redisPass},
	}, {
		name: "high entropy in config files",
		files: map[string]file{
			"/opt/app/.env":              {content: "# app\nAPI_TOKEN=" + envTok + "\nDEBUG=true\n"},
			"/etc/app/settings.yaml":     {content: "db:\n  password: \"" + yamlPass + "\"\n  user: app\n"},
			"/home/dev/.npmrc":           {content: "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=" + npmTok + "\n"},
			"/etc/app/oauth/client.toml": {content: "[oauth]\nclient_id = \"app\"\nclient_secret = '" + tomlSecret + "' # rotated\n"},
		},
		want: []Finding{
			f(RuleHighEntropy, "/etc/app/oauth/client.toml", 3), f(RuleHighEntropy, "/etc/app/settings.yaml", 2),
			f(RuleHighEntropy, "/home/dev/.npmrc", 2), f(RuleHighEntropy, "/opt/app/.env", 2),
		},
		secrets: []string{envTok, yamlPass, npmTok, tomlSecret},
	}, {
		name: "setuid and setgid",
		files: map[string]file{
			"/usr/local/bin/helper": {content: "#!/bin/sh\n", mode: 0o755 | fs.ModeSetuid},
			"/opt/tool/bin/tool":    {content: "#!/bin/sh\n", mode: 0o755 | fs.ModeSetgid},
		},
		want: []Finding{f(RuleSetuid, "/opt/tool/bin/tool", 0), f(RuleSetuid, "/usr/local/bin/helper", 0)},
	}, {
		name:  "world-writable dir",
		files: map[string]file{"/srv/shared": {mode: fs.ModeDir | 0o777}},
		want:  []Finding{f(RuleWorldWritableDir, "/srv/shared", 0)},
	}, {
		name: "ssh host keys and machine-id",
		files: map[string]file{
			"/etc/ssh/ssh_host_rsa_key":     {content: pemBlock("OPENSSH PRIVATE KEY", b1), mode: 0o600},
			"/etc/ssh/ssh_host_rsa_key.pub": {content: "ssh-rsa " + b2 + " root@build\n"},
			"/etc/ssh/ssh_host_ed25519_key": {content: "x", mode: 0o600},
			"/etc/machine-id":               {content: machineID + "\n", mode: 0o444},
		},
		want: []Finding{
			f(RuleMachineID, "/etc/machine-id", 0), f(RuleSSHHostKey, "/etc/ssh/ssh_host_ed25519_key", 0),
			f(RuleSSHHostKey, "/etc/ssh/ssh_host_rsa_key", 0), f(RulePrivateKey, "/etc/ssh/ssh_host_rsa_key", 1),
		},
		secrets: []string{b1, machineID},
	}}
}

// TestRules plants each rule's secrets in a rootfs and expects exactly the
// findings, with every secret absent from the findings, the report's JSON and
// the error.
func TestRules(t *testing.T) {
	covered := map[Rule]bool{}
	for _, tc := range ruleCases() {
		t.Run(tc.name, func(t *testing.T) {
			root := plant(t, tc.files)
			rep, values := scanRoot(t, root)
			if got := brief(rep.Findings); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("findings:\n got %v\nwant %v", got, tc.want)
			}
			assertNoLeak(t, rep, tc.secrets...)
			for _, v := range values { // whatever the rules matched stays out too
				assertNoLeak(t, rep, string(v))
			}
			err := rep.Err()
			if !errors.Is(err, ErrFindings) {
				t.Fatalf("Err() = %v, want ErrFindings", err)
			}
			for _, w := range tc.want {
				covered[w.Rule] = true
				if !strings.Contains(err.Error(), "\n"+w.String()) {
					t.Errorf("error does not list %q:\n%v", w.String(), err)
				}
			}
			for _, g := range rep.Findings {
				if g.Detail == "" {
					t.Errorf("%s: empty detail", g)
				}
			}
		})
	}
	for _, r := range Rules() {
		if !covered[r] {
			t.Errorf("rule %s has no planted test", r)
		}
	}
}

// TestLongLine plants secrets in and after a line longer than the read
// buffer, across a buffer boundary.
func TestLongLine(t *testing.T) {
	id := join("AK", "IA", fake(30, upperDigits, 16))
	ghp := join("gh", "p_", fake(31, alnum, 36))
	pad := strings.Repeat("x", blockSize-10)
	root := plant(t, map[string]file{
		"/srv/min.js": {content: "one\n" + pad + " " + id + " " + pad + pad + " " + ghp + "\nthree " + id + "\n"},
	})
	rep, _ := scanRoot(t, root)
	want := []Finding{
		f(RuleAWSAccessKeyID, "/srv/min.js", 2), f(RuleGitHubToken, "/srv/min.js", 2), f(RuleAWSAccessKeyID, "/srv/min.js", 3),
	}
	if got := brief(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	assertNoLeak(t, rep, id, ghp)
	if rep.Bytes != int64(len(pad)*3+len(id)*2+len(ghp)+15) {
		t.Errorf("bytes = %d", rep.Bytes)
	}
}
