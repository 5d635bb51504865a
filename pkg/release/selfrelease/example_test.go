package selfrelease_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
)

// ChecksumOf reads one file's sha256 from a release's checksums.txt, the
// check an install makes after it has verified the file's signature.
func ExampleChecksumOf() {
	checksums := []byte("" +
		"0f2c9238aa0000000000000000000000000000000000000000000000a57a4a01  slipway-cmp-linux-amd64\n" +
		"97d567a3bb00000000000000000000000000000000000000000000007a4a95ae  slipway-linux-amd64\n")
	sum, err := selfrelease.ChecksumOf(checksums, "slipway-linux-amd64")
	fmt.Println(sum, err)
	_, err = selfrelease.ChecksumOf(checksums, "slipway-linux-riscv64")
	fmt.Println(err != nil)
	// Output:
	// 97d567a3bb00000000000000000000000000000000000000000000007a4a95ae <nil>
	// true
}
