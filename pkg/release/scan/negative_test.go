package scan

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestNoFalsePositives plants look-alikes of every rule that are not
// secrets and expects no finding.
func TestNoFalsePositives(t *testing.T) {
	b1 := fake(40, base64Chars, 64)
	hex := fake(41, "0123456789abcdef", 40)
	files := map[string]file{
		// Public halves, certificates and PEM markers in code and data.
		"/etc/ssl/certs/ca.pem":           {content: pemBlock("CERTIFICATE", b1)},
		"/etc/ssl/pub.pem":                {content: pemBlock("PUBLIC KEY", b1)},
		"/home/dev/.ssh/id_ed25519.pub":   {content: "ssh-ed25519 " + b1 + " dev@host\n"},
		"/etc/ssh/ssh_host_rsa_key.pub":   {content: "ssh-rsa " + b1 + " root@build\n"},
		"/usr/lib/python3/crypto/ssh.py":  {content: "_SK_START = b\"-----BEGIN OPENSSH PRIVATE KEY-----\"\n_SK_END = b\"-----END OPENSSH PRIVATE KEY-----\"\n"},
		"/usr/lib/python3/rsa/pem.py":     {content: "markers = ('-----BEGIN RSA PRIVATE KEY-----', '-----END RSA PRIVATE KEY-----')\n"},
		"/usr/share/mime/packages/fd.xml": {content: "<match type=\"string\" value=\"-----BEGIN PGP PRIVATE KEY BLOCK-----\" offset=\"0\"/>\n"},
		"/usr/lib/node/docs/config.md":    {content: "key=\"-----BEGIN PRIVATE KEY-----\\nXXXX\\nXXXX\\n-----END PRIVATE KEY-----\"\n"},
		"/usr/lib/python3/gen.py":         {content: "s = '-----BEGIN RSA PRIVATE KEY-----\\n'\ns += b64encode(der)\n"},
		"/srv/last-line.pem":              {content: "-----BEGIN RSA PRIVATE KEY-----"},
		// AWS's documented sample key pair and references to variables.
		"/usr/share/doc/aws/example.ini": {content: "aws_access_key_id = " + join("AK", "IA", "IOSFODNN7", "EXAMPLE") +
			"\naws_secret_access_key = " + join("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCY", "EXAMPLEKEY") + "\n"},
		"/opt/app/boto.py":   {content: "client(aws_secret_access_key=aws_secret_access_key, region=region)\n"},
		"/opt/app/env.sh":    {content: "export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n"},
		"/opt/app/akia.txt":  {content: "AKIA is a prefix; AKIAtoo_short and " + join("AK", "IA", "LOWERcase0123456") + "\n"},
		"/opt/gh/README.md":  {content: "tokens look like ghp_xxxx or " + join("gh", "p_", "short") + "\n"},
		"/opt/slack/doc.md":  {content: "xoxb-your-token and " + join("https://hooks.", "slack.com/services/T00000000/B00000000/", "XXXXXXXXXXXXXXXXXXXXXXXX") + "\n"},
		"/opt/gcp/user.json": {content: "{\"type\": \"authorized_user\", \"client_id\": \"x\"}\n"},
		"/opt/gcp/sa.json":   {content: "{\"type\": \"service_account\", \"client_email\": \"x@y\"}\n"},
		// Docker configs without credentials.
		"/root/.docker/config.json":   {content: "{\"auths\": {\"ghcr.io\": {}, \"quay.io\": {\"auth\": \"\"}}, \"credsStore\": \"desktop\"}\n"},
		"/opt/app/config.json":        {content: "{\"name\": \"app\", \"auth\": {\"auth\": \"basic\"}, \"password\": \"" + hex + "\"}\n"},
		"/opt/app/nested/config.json": {content: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"},
		// URLs without a real password.
		"/etc/app/urls.conf": {content: "a = postgres://app:${DB_PASSWORD}@db/app\nb = https://user:$PASS@host.internal/\n" +
			"c = https://user:{{ .Password }}@h/\nd = https://user:password@registry.internal/\ne = ssh://git@github.com:22/x\n" +
			"f = https://u:secret@example.com/\ng = cvs://:pserver:anoncvs@sources.redhat.com:/cvs/src\nh = http://[::1]:8080/\n" +
			"i = https://user:<password>@h/\nj = postgres://app:@db/app\nk = f\"http://{user}:{password}@h\"\n"},
		// Config values that are not secrets: low entropy, placeholders, paths,
		// URLs, other keys, flags, and a high-entropy value in a non-config file.
		"/etc/app/app.yaml": {content: "password: changeme\npassword: changemechangeme\ntoken: ${API_TOKEN}\n" +
			"secret_file: /run/secrets/app-secret-token-v1\nauth_url: https://auth.internal/oauth2/token/v1/x\n" +
			"image_digest: sha256:" + hex + "\nauthor: Jane Q. Public 1234567890abcdefXYZ\ntokenizer: bert-base-multilingual-cased\n" +
			"  --authorizer-token-secret-version=projects/p/secrets/" + hex + "/versions/1\npassword: \"" + "{{ .Values.password }}\"\n" +
			"api_key: ENC[AES256_GCM,data:" + hex + "]\npassword: '" + "unterminated\n"},
		"/opt/app/main.go": {content: "const token = \"" + fake(42, alnum, 32) + "\"\n"},
		// Metadata: allowed setuid, sticky world-writable dirs, empty or
		// first-boot machine ids, symlinks.
		"/usr/bin/passwd":          {content: "x", mode: 0o755 | fs.ModeSetuid},
		"/usr/sbin/unix_chkpwd":    {content: "x", mode: 0o755 | fs.ModeSetgid},
		"/var/mail":                {mode: fs.ModeDir | 0o775 | fs.ModeSetgid},
		"/tmp":                     {mode: fs.ModeDir | fs.ModeSticky | 0o777},
		"/etc/machine-id":          {content: ""},
		"/var/lib/dbus/machine-id": {content: "uninitialized\n"},
		"/etc/ssh/sshd_config":     {content: "PasswordAuthentication no\nHostKey /etc/ssh/ssh_host_rsa_key\n"},
		"/bin":                     {link: "usr/bin"},
	}
	root := plant(t, files)
	rep, _ := scanRoot(t, root)
	if len(rep.Findings) != 0 {
		t.Errorf("false positives:\n%v", rep.Findings)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
}

// TestSymlinksNotFollowed points symlinks in the rootfs at host files and
// directories holding secrets: none is read.
func TestSymlinksNotFollowed(t *testing.T) {
	host := t.TempDir()
	secret := pemBlock("RSA PRIVATE KEY", fake(50, base64Chars, 64))
	if err := os.WriteFile(filepath.Join(host, "id_rsa"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "machine-id"), []byte("0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := plant(t, map[string]file{
		"/root/.ssh/id_rsa":         {link: filepath.Join(host, "id_rsa")},
		"/root/.ssh/relative":       {link: "../../../../../../../../" + filepath.Join(host, "id_rsa")},
		"/hostdir":                  {link: host},
		"/etc/machine-id":           {link: filepath.Join(host, "machine-id")},
		"/etc/ssh/ssh_host_rsa_key": {link: filepath.Join(host, "id_rsa")},
	})
	rep, _ := scanRoot(t, root)
	if len(rep.Findings) != 0 || rep.Files != 0 {
		t.Errorf("symlinks followed: files=%d findings=%v", rep.Files, rep.Findings)
	}
}

// TestSkipped counts binary and large files without reading their content
// rules, while the name and mode rules still apply.
func TestSkipped(t *testing.T) {
	id := join("AK", "IA", fake(60, upperDigits, 16))
	big := bytes.Repeat([]byte("filler line\n"), 200)
	root := plant(t, map[string]file{
		"/usr/lib/libx.so":      {content: "\x7fELF\x00\x00" + id + "\n"},
		"/var/big.log":          {content: string(big) + id + "\n"},
		"/usr/local/bin/big-su": {content: string(big), mode: 0o755 | fs.ModeSetuid},
		"/etc/small.txt":        {content: "ok\n"},
		"/etc/empty":            {content: ""},
	})
	rep, _ := scanRoot(t, root, WithMaxFileSize(1024))
	want := []Finding{f(RuleSetuid, "/usr/local/bin/big-su", 0)}
	if got := brief(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if rep.Files != 5 || rep.SkippedBinary != 1 || rep.SkippedLarge != 2 {
		t.Errorf("files=%d binary=%d large=%d, want 5 1 2", rep.Files, rep.SkippedBinary, rep.SkippedLarge)
	}
	if want := int64(len("\x7fELF\x00\x00"+id+"\n") + len("ok\n")); rep.Bytes != want {
		t.Errorf("bytes = %d, want %d", rep.Bytes, want)
	}
}
