package sbom

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/anchore/syft/syft/format"
	"github.com/anchore/syft/syft/format/cyclonedxjson"
	"github.com/anchore/syft/syft/format/spdxjson"
)

// ErrDecode: a document is not an SPDX or CycloneDX JSON SBOM that syft
// can read.
var ErrDecode = errors.New("sbom: not a readable SPDX or CycloneDX JSON document")

// maxDocument bounds what Decode reads (an SBOM of a large image is a few
// MB; this is far above that).
const maxDocument = 256 << 20

// Decode reads the packages of an SPDX or CycloneDX JSON document (as
// Generate writes them, or as an SBOM attestation's predicate carries
// them) with syft's decoders, sorted and without duplicates like Packages.
func Decode(doc []byte) ([]Package, error) {
	if len(doc) > maxDocument {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrDecode, len(doc), maxDocument)
	}
	dec := format.NewDecoderCollection(spdxjson.NewFormatDecoder(), cyclonedxjson.NewFormatDecoder())
	s, _, _, err := dec.Decode(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if s == nil {
		return nil, ErrDecode
	}
	return packagesOf(s), nil
}
