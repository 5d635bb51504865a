package policy_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/policy"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// TestVerifyEnvelope: an envelope verifies with whichever key of the
// policy signed it; one signed by a key the policy does not hold, or
// changed after signing, is refused naming the keys tried. The policy is
// read from a config repository's files (ReadFrom), key files beside it.
func TestVerifyEnvelope(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeKey(t, dir, "other")
	_, priv := writeKey(t, dir, "release")
	sv, err := sign.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.New("pools/agents/generations/g-"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("a", 64), "https://slipway.dev/rollout-evidence/v1", []byte(`{"passed":true}`))
	if err != nil {
		t.Fatal(err)
	}
	stb, _ := attest.Marshal(st)
	env, err := sign.SignEnvelope(ctx, sv, stb)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"policies/verification.yaml": `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: agents}
spec:
  transparencyLog: none
  keys: [{name: other, publicKeyFile: keys/other.pub}, {name: release, publicKeyFile: keys/release.pub}]
  rules: [{name: images, signatures: {keys: [release]}}]
`,
	}
	for _, k := range []string{"other", "release"} {
		b, _ := os.ReadFile(filepath.Join(dir, k+".pub"))
		files["policies/keys/"+k+".pub"] = string(b)
	}
	read := func(p string) ([]byte, error) {
		b, ok := files[path.Clean(p)]
		if !ok {
			return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		return []byte(b), nil
	}
	pol, err := policy.ReadFrom(read, "policies/verification.yaml", "policies/verification.yaml in config.git")
	if err != nil {
		t.Fatal(err)
	}
	got, key, err := pol.VerifyEnvelope(ctx, env)
	if err != nil || key != "release" || got.GetPredicateType() != "https://slipway.dev/rollout-evidence/v1" {
		t.Fatalf("%v %q %v", got, key, err)
	}

	// A policy without the signing key.
	files["policies/verification.yaml"] = strings.Replace(files["policies/verification.yaml"], ", {name: release, publicKeyFile: keys/release.pub}", "", 1)
	files["policies/verification.yaml"] = strings.Replace(files["policies/verification.yaml"], "keys: [release]", "keys: [other]", 1)
	other, err := policy.ReadFrom(read, "policies/verification.yaml", "policies/verification.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.VerifyEnvelope(ctx, env); !errors.Is(err, policy.ErrUntrusted) || !errors.Is(err, sign.ErrVerification) || !strings.Contains(err.Error(), "keys other") {
		t.Errorf("wrong key: %v", err)
	}
	// Changed after signing.
	tampered := strings.Replace(string(env), `"payload":"`, `"payload":"eyJ`, 1)
	if _, _, err := pol.VerifyEnvelope(ctx, []byte(tampered)); !errors.Is(err, policy.ErrUntrusted) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := policy.ReadFrom(read, "policies/missing.yaml", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing policy: %v", err)
	}
}
