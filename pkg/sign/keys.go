package sign

import (
	"fmt"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
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
