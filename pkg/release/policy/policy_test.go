package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// writeKey writes a fresh cosign public key to dir/name.pub.
func writeKey(t *testing.T, dir, name string) (pubFile string, priv []byte) {
	t.Helper()
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pubFile = filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pubFile, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return pubFile, priv
}

const head = `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata:
  name: test
spec:
  transparencyLog: none
  keys:
    - name: release
      publicKeyFile: release.pub
`

func TestLoadRefusals(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "release")
	rule := `  rules:
    - name: all
      signatures:
        keys: [release]
`
	tests := []struct {
		name, body string
		line       int
		msg        string
	}{
		{"unknown field", head + rule + "  extra: 1\n", 14, "unknown field \"extra\""},
		{"wrong apiVersion", strings.Replace(head, "v1alpha1", "v2", 1) + rule, 1, "apiVersion"},
		{"wrong kind", strings.Replace(head, "VerificationPolicy", "Policy", 1) + rule, 2, "kind"},
		{"no tlog mode", strings.Replace(head, "  transparencyLog: none\n", "", 1) + rule, 6, "transparencyLog: " + policy.ErrPolicy.Error() + ": required"},
		{"tlog mode not here", strings.Replace(head, "none", "rekor", 1) + rule, 6, `"rekor" is not supported`},
		{"no rules", head, 6, "no rules"},
		{"requires nothing", head + "  rules:\n    - name: lax\n      match:\n        kinds: [runner]\n", 11, "requires nothing"},
		{"unverified and requirements", head + rule + "      allowUnverified: true\n", 14, "also allows unverified"},
		{"unknown key", head + "  rules:\n    - name: all\n      signatures:\n        keys: [release, ops]\n", 13, `unknown key "ops"`},
		{"unknown kind", head + "  rules:\n    - name: all\n      match:\n        kinds: [widget]\n      signatures:\n        keys: [release]\n", 13, `unknown artifact kind "widget"`},
		{"bad pattern", head + "  rules:\n    - name: all\n      match:\n        repositories: ['a/[']\n      signatures:\n        keys: [release]\n", 13, "bad pattern"},
		{"builder on sbom", head + "  rules:\n    - name: all\n      attestations:\n        - type: sbom\n          keys: [release]\n          builderID: x\n", 13, "SLSA provenance only"},
		{"unknown attestation type", head + "  rules:\n    - name: all\n      attestations:\n        - type: vex\n          keys: [release]\n", 13, `unknown attestation type "vex"`},
		{"attestation without keys", head + "  rules:\n    - name: all\n      attestations:\n        - type: sbom\n", 13, "no keys"},
		{"missing key file", strings.Replace(head, "release.pub", "nope.pub", 1) + rule, 9, "nope.pub"},
		{"bad key", strings.Replace(head, "publicKeyFile: release.pub", "publicKey: not-a-pem", 1) + rule, 9, "public key"},
		{"second document", head + rule + "---\nkind: x\n", 14, "one document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, "policy.yaml")
			if err := os.WriteFile(file, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := policy.Load(file)
			if !errors.Is(err, policy.ErrPolicy) {
				t.Fatalf("err = %v, want ErrPolicy", err)
			}
			want := file + ":" + strconv.Itoa(tc.line) + ":"
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %q\nwant prefix %q and %q", err, want, tc.msg)
			}
		})
	}
}

func TestLoadGood(t *testing.T) {
	dir := t.TempDir()
	writeKey(t, dir, "release")
	body := head + `  rules:
    - name: templates
      match:
        kinds: [workspace-template]
        repositories: ["127.0.0.1:*/templates/*"]
      signatures:
        keys: [release]
      attestations:
        - type: slsaprovenance
          builderID: https://slipway.dev/builders/ci
          buildType: https://slipway.dev/template-build/v1
        - name: bom
          type: sbom
    - name: dev
      match:
        repositories: ["127.0.0.1:*/scratch/*"]
      allowUnverified: true
`
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata.Name != "test" || len(p.Spec.Rules) != 2 || p.Spec.Rules[0].Attestations[1].Name != "bom" {
		t.Errorf("loaded %+v", p)
	}
}
