package sign

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
)

// SignBlob signs data as "cosign sign-blob --key" does with no transparency
// log, returning the signature base64-encoded: what cosign writes to
// --output-signature.
func SignBlob(sv signature.SignerVerifier, data []byte) ([]byte, error) {
	sig, err := sv.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("sign blob: %w", err)
	}
	return []byte(base64.StdEncoding.EncodeToString(sig)), nil
}

// VerifyBlob checks sig, base64 as cosign sign-blob writes it (raw bytes are
// accepted too, as cosign does), over data with v: "cosign verify-blob --key
// KEY --signature SIG --insecure-ignore-tlog" semantics. It refuses with
// ErrVerification.
func VerifyBlob(v signature.Verifier, data, sig []byte) error {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	if err != nil {
		raw = sig
	}
	if err := v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%w: the signature does not match the file and key: %v", ErrVerification, err)
	}
	return nil
}
