package sign

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
)

// GenerateKeys makes a cosign key pair: an ECDSA P-256 private key in PKCS #8,
// encrypted with password the way "cosign generate-key-pair" does it
// ("ENCRYPTED SIGSTORE PRIVATE KEY" PEM), and the matching public key PEM.
// An empty password is refused: an unencrypted signing key is not a default.
func GenerateKeys(password []byte) (priv, pub []byte, err error) {
	if len(password) == 0 {
		return nil, nil, fmt.Errorf("%w: empty password", ErrKey)
	}
	// cosign keeps the bytes the PassFunc returns; hand it a copy so the
	// caller can wipe theirs.
	pw := append([]byte(nil), password...)
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return pw, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("%w: generate key pair: %w", ErrKey, err)
	}
	return kb.PrivateBytes, kb.PublicBytes, nil
}

// LoadSigner decrypts a cosign private key PEM with password. A wrong
// password or a damaged key is an ErrKey; the message never contains the
// password.
func LoadSigner(privPEM, password []byte) (signature.SignerVerifier, error) {
	if len(privPEM) == 0 {
		return nil, fmt.Errorf("%w: empty private key", ErrKey)
	}
	sv, err := cosign.LoadPrivateKey(privPEM, password, nil)
	if err != nil {
		// cosign's messages name the step ("decrypt: ...", "invalid pem
		// block"), never the password; keep them, but make the usual case
		// read plainly.
		if strings.HasPrefix(err.Error(), "decrypt:") {
			return nil, fmt.Errorf("%w: private key: wrong password or damaged key: %w", ErrKey, err)
		}
		return nil, fmt.Errorf("%w: private key: %w", ErrKey, err)
	}
	return sv, nil
}

// LoadVerifier reads a public key PEM (as written by GenerateKeys or
// "cosign generate-key-pair") into a verifier. ED25519 keys verify in the
// pre-hashed mode cosign uses, matching LoadSigner.
func LoadVerifier(pubPEM []byte) (signature.Verifier, error) {
	if len(pubPEM) == 0 {
		return nil, fmt.Errorf("%w: empty public key", ErrKey)
	}
	pk, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrKey, err)
	}
	v, err := signature.LoadDefaultVerifier(pk, sigopts.WithED25519ph())
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrKey, err)
	}
	return v, nil
}

// IsKMSRef reports whether keyRef names a KMS key ("awskms://…",
// "gcpkms://…", "hashivault://…", or "<plugin>://…" for a sigstore KMS CLI
// plugin) rather than a key file.
func IsKMSRef(keyRef string) bool { return strings.Contains(keyRef, "://") }

// LoadSignerRef loads the signing key keyRef: a KMS key URI through
// sigstore's KMS signer interface (the providers and CLI plugins that are
// configured in this binary and on PATH), or a cosign private key file
// decrypted with the password that password returns (called only for a
// file). A KMS URI no provider serves is an ErrKey naming the URI.
func LoadSignerRef(ctx context.Context, keyRef string, password func() ([]byte, error)) (signature.SignerVerifier, error) {
	sv, pem, err := openKeyRef(ctx, keyRef)
	if sv != nil || err != nil {
		return sv, err
	}
	pw, err := password()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKey, keyRef, err)
	}
	if sv, err = LoadSigner(pem, pw); err != nil {
		return nil, fmt.Errorf("%s: %w", keyRef, err)
	}
	return sv, nil
}

// LoadVerifierRef loads the public key keyRef: a KMS key URI (its public
// half, from the provider) or a PEM public key file.
func LoadVerifierRef(ctx context.Context, keyRef string) (signature.Verifier, error) {
	sv, pem, err := openKeyRef(ctx, keyRef)
	if sv != nil || err != nil {
		return sv, err
	}
	v, err := LoadVerifier(pem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyRef, err)
	}
	return v, nil
}

// openKeyRef returns the KMS signer keyRef names, or the bytes of the key
// file it names.
func openKeyRef(ctx context.Context, keyRef string) (signature.SignerVerifier, []byte, error) {
	if keyRef == "" {
		return nil, nil, fmt.Errorf("%w: no key given", ErrKey)
	}
	if IsKMSRef(keyRef) {
		sv, err := kms.Get(ctx, keyRef, crypto.SHA256)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: KMS key %s: %w", ErrKey, keyRef, err)
		}
		return sv, nil, nil
	}
	pem, err := os.ReadFile(keyRef)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return nil, pem, nil
}

// PublicKeyPEM returns the PEM public key of a signer (to write beside a
// KMS key, or to check which key signed).
func PublicKeyPEM(sv signature.SignerVerifier) ([]byte, error) {
	pk, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrKey, err)
	}
	b, err := cryptoutils.MarshalPublicKeyToPEM(pk)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", ErrKey, err)
	}
	return b, nil
}
