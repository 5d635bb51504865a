package sign_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	// sigstore's in-memory KMS provider ("fakekms://"): no KMS is reachable
	// here, so this is the only way to drive the KMS path end to end. It
	// checks the plumbing (URI to sigstore's KMS interface to Sign and
	// Verify), not any cloud provider.
	_ "github.com/sigstore/sigstore/pkg/signature/kms/fake"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

func TestLoadRefs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	priv, pub, err := sign.GenerateKeys([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile, pubFile := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	os.WriteFile(keyFile, priv, 0o600)
	os.WriteFile(pubFile, pub, 0o644)
	pw := func() ([]byte, error) { return []byte("pw"), nil }

	sv, err := sign.LoadSignerRef(ctx, keyFile, pw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sign.PublicKeyPEM(sv)
	if err != nil || string(got) != string(pub) {
		t.Errorf("PublicKeyPEM = %s, %v; want the generated public key", got, err)
	}
	if _, err := sign.LoadVerifierRef(ctx, pubFile); err != nil {
		t.Error(err)
	}
	_, err = sign.LoadSignerRef(ctx, keyFile, func() ([]byte, error) { return []byte("nope"), nil })
	if !errors.Is(err, sign.ErrKey) || !strings.Contains(err.Error(), keyFile) || strings.Contains(err.Error(), "nope") {
		t.Errorf("wrong password: err = %v", err)
	}
	if _, err := sign.LoadSignerRef(ctx, filepath.Join(dir, "absent.key"), pw); !errors.Is(err, sign.ErrKey) || !strings.Contains(err.Error(), "absent.key") {
		t.Errorf("absent key: err = %v", err)
	}
	// A KMS scheme with no provider and no plugin on PATH names the URI.
	t.Setenv("PATH", dir)
	_, err = sign.LoadSignerRef(ctx, "nosuchkms://key/1", pw)
	if !errors.Is(err, sign.ErrKey) || !strings.Contains(err.Error(), "nosuchkms://key/1") {
		t.Errorf("unserved KMS: err = %v", err)
	}
}

// TestKMSSignVerify signs and verifies through sigstore's KMS interface.
func TestKMSSignVerify(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	ref := pushRandom(t, host, "app")
	sv, err := sign.LoadSignerRef(ctx, "fakekms://release", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Sign(ctx, ref, sv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}
	// (The fake makes a new key on every Get, so the verifier is the
	// signer itself here; a real provider returns the same key.)
	if _, err := sign.Verify(ctx, ref, sv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}
	// Its public key, as a PEM file, verifies too (what a policy holds).
	pem, err := sign.PublicKeyPEM(sv)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := sign.LoadVerifier(pem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Verify(ctx, ref, pv, sign.WithOfflineNoTlog()); err != nil {
		t.Fatal(err)
	}
}
