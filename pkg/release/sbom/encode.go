package sbom

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	cyclonedx "github.com/CycloneDX/cyclonedx-go"
	"github.com/anchore/syft/syft/format/common/cyclonedxhelpers"
	"github.com/anchore/syft/syft/format/common/spdxhelpers"
	syftsbom "github.com/anchore/syft/syft/sbom"
	"github.com/google/uuid"
	"github.com/spdx/tools-golang/spdx"
)

// CycloneDXVersion is the CycloneDX specification version of CycloneDXJSON.
const CycloneDXVersion = "1.6"

// namespaceBase prefixes derived SPDX document namespaces.
const namespaceBase = "https://slipway.dev/spdx/"

// docMeta is what the documents say about themselves, in place of syft's clock and random UUIDs.
type docMeta struct {
	name      string
	namespace string
	created   time.Time
}

// derivedNamespace names a document by the hash of its own bytes (encoded without a namespace).
func derivedNamespace(name string, probe []byte) string {
	sum := sha256.Sum256(probe)
	return namespaceBase + url.PathEscape(name) + "-" + hex.EncodeToString(sum[:])
}

// encodeSPDX converts with syft's SPDX model, replaces the name, namespace and creation time, sorts
// every list whose order syft does not promise, and encodes SPDX 2.3 JSON.
func encodeSPDX(s syftsbom.SBOM, m docMeta) ([]byte, error) {
	doc := spdxhelpers.ToFormatModel(s)
	if doc == nil || doc.CreationInfo == nil {
		return nil, fmt.Errorf("%w: syft produced no spdx document", ErrCatalog)
	}
	doc.DocumentName = m.name
	doc.DocumentNamespace = m.namespace
	doc.CreationInfo.Created = m.created.UTC().Format(time.RFC3339)

	slices.SortStableFunc(doc.Packages, func(a, b *spdx.Package) int {
		return cmp.Compare(a.PackageSPDXIdentifier, b.PackageSPDXIdentifier)
	})
	slices.SortStableFunc(doc.Files, func(a, b *spdx.File) int {
		return cmp.Compare(a.FileSPDXIdentifier, b.FileSPDXIdentifier)
	})
	slices.SortStableFunc(doc.OtherLicenses, func(a, b *spdx.OtherLicense) int {
		return cmp.Compare(a.LicenseIdentifier, b.LicenseIdentifier)
	})
	slices.SortStableFunc(doc.Relationships, func(a, b *spdx.Relationship) int {
		return cmp.Or(
			cmp.Compare(a.RefA.DocumentRefID, b.RefA.DocumentRefID),
			cmp.Compare(a.RefA.ElementRefID, b.RefA.ElementRefID),
			cmp.Compare(a.Relationship, b.Relationship),
			cmp.Compare(a.RefB.DocumentRefID, b.RefB.DocumentRefID),
			cmp.Compare(a.RefB.ElementRefID, b.RefB.ElementRefID),
			cmp.Compare(a.RelationshipComment, b.RelationshipComment),
		)
	})
	doc.Relationships = slices.CompactFunc(doc.Relationships, func(a, b *spdx.Relationship) bool { return *a == *b })

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("%w: encode spdx: %w", ErrCatalog, err)
	}
	return buf.Bytes(), nil
}

// encodeCycloneDX converts with syft's CycloneDX model, replaces the serial number (a name-based UUID
// of the SPDX namespace) and the timestamp, sorts, and encodes CycloneDX JSON.
func encodeCycloneDX(s syftsbom.SBOM, m docMeta) ([]byte, error) {
	bom := cyclonedxhelpers.ToFormatModel(s)
	if bom == nil || bom.Metadata == nil {
		return nil, fmt.Errorf("%w: syft produced no cyclonedx document", ErrCatalog)
	}
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, []byte(m.namespace)).URN()
	bom.Metadata.Timestamp = m.created.UTC().Format(time.RFC3339)
	if bom.Components != nil {
		sortComponents(*bom.Components)
	}
	if bom.Dependencies != nil {
		deps := *bom.Dependencies
		for i := range deps {
			if deps[i].Dependencies != nil {
				slices.Sort(*deps[i].Dependencies)
			}
		}
		slices.SortStableFunc(deps, func(a, b cyclonedx.Dependency) int { return cmp.Compare(a.Ref, b.Ref) })
	}

	var buf bytes.Buffer
	enc := cyclonedx.NewBOMEncoder(&buf, cyclonedx.BOMFileFormatJSON)
	enc.SetPretty(false)
	enc.SetEscapeHTML(false)
	if err := enc.EncodeVersion(bom, cyclonedx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("%w: encode cyclonedx: %w", ErrCatalog, err)
	}
	return buf.Bytes(), nil
}

func sortComponents(cs []cyclonedx.Component) {
	for i := range cs {
		if cs[i].Components != nil {
			sortComponents(*cs[i].Components)
		}
	}
	slices.SortStableFunc(cs, func(a, b cyclonedx.Component) int {
		return cmp.Or(
			cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.PackageURL, b.PackageURL),
			cmp.Compare(a.BOMRef, b.BOMRef),
		)
	})
}
