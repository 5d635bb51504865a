package selfrelease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// VerifyDownload is what an install does before it runs a downloaded binary:
// it checks the signature sig over checksums with the release key v, then
// that checksums lists name with data's sha256. Any mismatch refuses, with
// sign.ErrVerification.
func VerifyDownload(v signature.Verifier, checksums, sig []byte, name string, data []byte) error {
	if err := sign.VerifyBlob(v, checksums, sig); err != nil {
		return fmt.Errorf("%s: %w", ChecksumsFile, err)
	}
	want, err := ChecksumOf(checksums, name)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%w: %s has sha256 %s, the signed %s says %s", sign.ErrVerification, name, got, ChecksumsFile, want)
	}
	return nil
}

// ChecksumOf reads name's sha256 from a checksums.txt.
func ChecksumOf(checksums []byte, name string) (string, error) {
	for _, l := range strings.Split(string(checksums), "\n") {
		sum, file, ok := strings.Cut(l, "  ")
		if ok && file == name && len(sum) == 64 {
			return sum, nil
		}
	}
	return "", fmt.Errorf("%w: %s lists no %s", sign.ErrVerification, ChecksumsFile, name)
}
