package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliPassword = "Sekrit-pw-42"

func TestSignAttestVerify(t *testing.T) {
	_, host, digests := registryWith(t, "runners/agent:v1", "runners/agent:v2")
	signed := host + "/runners/agent@" + digests["runners/agent:v1"]
	unsigned := host + "/runners/agent@" + digests["runners/agent:v2"]
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", cliPassword)
	key := filepath.Join(dir, "ci.key")

	all := ""
	check := func(r result, code int, what string) result {
		t.Helper()
		all += r.stdout + r.stderr
		if r.code != code {
			t.Fatalf("%s: exit %d, want %d\n%s%s", what, r.code, code, r.stdout, r.stderr)
		}
		return r
	}
	check(run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(dir, "ci")), 0, "keys generate")
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi, err)
	}
	check(run(t, "", "keys", "generate", "--output-key-prefix", filepath.Join(dir, "ci")), 2, "keys generate over existing files")

	r := check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog"), 0, "sign")
	if !strings.HasPrefix(r.stdout, "created "+signed) {
		t.Errorf("sign output %q", r.stdout)
	}
	r = check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog", "-o", "json"), 0, "sign again")
	var sj struct{ Status string }
	if json.Unmarshal([]byte(r.stdout), &sj); sj.Status != "unchanged" {
		t.Errorf("second sign: %s", r.stdout)
	}

	pred := filepath.Join(dir, "sbom.json")
	os.WriteFile(pred, []byte(`{"spdxVersion":"SPDX-2.3","name":"agent"}`), 0o644)
	check(run(t, "", "attest", signed, "--key", key, "--type", "spdx", "--predicate", pred, "--offline-no-tlog"), 0, "attest")
	// Sign and attest in one run: the signature is there already, the
	// CycloneDX attestation is new.
	cdx := filepath.Join(dir, "bom.json")
	os.WriteFile(cdx, []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5"}`), 0o644)
	r = check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog", "--attest", "cyclonedx="+cdx), 0, "sign --attest")
	if !strings.Contains(r.stdout, "unchanged "+signed) || !strings.Contains(r.stdout, "created "+signed+" https://cyclonedx.org/bom") {
		t.Errorf("sign --attest output:\n%s", r.stdout)
	}
	check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog", "--attest", "cyclonedx"), 2, "sign --attest without a file")

	pol := filepath.Join(dir, "policy.yaml")
	os.WriteFile(pol, []byte(`apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: runners}
spec:
  transparencyLog: none
  keys: [{name: ci, publicKeyFile: ci.pub}]
  rules:
    - name: runners
      match: {kinds: [runner]}
      signatures: {keys: [ci]}
      attestations: [{type: sbom}]
`), 0o644)
	r = check(run(t, "", "verify", signed, "--policy", pol, "--kind", "runner"), 0, "verify signed")
	if !strings.Contains(r.stdout, "ok   runners/signature") || !strings.Contains(r.stdout, "ok   runners/attestation/sbom") {
		t.Errorf("verify output:\n%s", r.stdout)
	}
	r = check(run(t, "", "verify", unsigned, "--policy", pol, "--kind", "runner"), 1, "verify unsigned")
	if !strings.HasPrefix(r.stdout, "REFUSED") || !strings.Contains(r.stdout, "FAIL runners/signature: no signature of "+unsigned) {
		t.Errorf("refusal output:\n%s", r.stdout)
	}
	r = check(run(t, "", "verify", host+"/runners/agent:v1", "--policy", pol, "--kind", "runner", "-o", "json"), 1, "verify a tag")
	var vj struct {
		Verified bool
		Checks   []struct{ Name, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &vj); err != nil || vj.Verified || vj.Checks[0].Name != "reference" {
		t.Errorf("tag refusal JSON: %v\n%s", err, r.stdout)
	}

	// Usage and input errors: exit 2, naming what is wrong.
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: slipway.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: x}\nspec:\n  transparencyLog: none\n  rulez: []\n"), 0o644)
	r = check(run(t, "", "verify", signed, "--policy", filepath.Join(dir, "bad.yaml")), 2, "bad policy")
	if !strings.Contains(r.stderr, "bad.yaml:6:") {
		t.Errorf("bad policy error %q does not name file:line", r.stderr)
	}
	check(run(t, "", "sign", signed, "--key", key), 2, "sign without a tlog choice")
	check(run(t, "", "sign", host+"/runners/agent:v1", "--key", key, "--offline-no-tlog"), 2, "sign a tag")
	check(run(t, "", "attest", signed, "--key", key, "--type", "slsaprovenance", "--predicate", pred, "--offline-no-tlog"), 2, "attest an SBOM as provenance")
	check(run(t, "", "attest", signed, "--key", key, "--type", "bogus", "--predicate", pred, "--offline-no-tlog"), 2, "attest with an unknown type")
	t.Setenv("COSIGN_PASSWORD", "wrong-password")
	r = check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog"), 2, "sign with a wrong password")
	if !strings.Contains(r.stderr, "wrong password") {
		t.Errorf("wrong password error: %q", r.stderr)
	}
	os.Unsetenv("COSIGN_PASSWORD")
	r = check(run(t, "", "sign", signed, "--key", key, "--offline-no-tlog"), 2, "sign without COSIGN_PASSWORD")
	if !strings.Contains(r.stderr, "COSIGN_PASSWORD is not set") {
		t.Errorf("no password error: %q", r.stderr)
	}
	if strings.Contains(all, cliPassword) || strings.Contains(all, "wrong-password") {
		t.Error("a password appeared in the output")
	}
}
