package ref

import (
	"fmt"
	"strings"
)

// Pin is a reference resolved to its immutable identity. Name is the
// repository as written, Tag the human tag the pin came from (may be empty),
// Digest the identity, and Origin where the digest was learnt.
type Pin struct {
	Name   string `json:"name"`
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest"`
	Origin Origin `json:"origin"`
}

// Origin says where a pin's digest came from.
type Origin struct {
	// Source is how the digest was learnt: SourceRegistry, SourceLock or SourceWritten.
	Source string `json:"source" yaml:"source"`
	// Registry is the normalised registry host asked (or that the lock names).
	Registry string `json:"registry,omitempty" yaml:"registry,omitempty"`
	// MediaType is the manifest media type the digest names, when known.
	MediaType string `json:"mediaType,omitempty" yaml:"mediaType,omitempty"`
	// Platform is the os/arch[/variant] the digest was selected for, empty for an index
	// or a single-platform manifest pinned as it is.
	Platform string `json:"platform,omitempty" yaml:"platform,omitempty"`
}

// Sources of a pin's digest.
const (
	SourceRegistry = "registry" // asked a registry
	SourceLock     = "lock"     // read from a lock file
	SourceWritten  = "written"  // the reference already carried the digest
)

// String is name[:tag]@digest.
func (p Pin) String() string { return join(p.Name, p.Tag, p.Digest) }

// DigestRef is name@digest, the tag dropped.
func (p Pin) DigestRef() string { return join(p.Name, "", p.Digest) }

// Reference parses the pin back into a Reference.
func (p Pin) Reference() (Reference, error) { return Parse(p.String()) }

// Validate checks that the pin has a name and a sha256 digest.
func (p Pin) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("%w: pin has no name", ErrInvalid)
	}
	if !strings.HasPrefix(p.Digest, "sha256:") || len(p.Digest) != len("sha256:")+64 {
		return fmt.Errorf("%w: pin %s: digest %q is not sha256:<64 hex>", ErrInvalid, p.Name, p.Digest)
	}
	_, err := p.Reference()
	return err
}

// PinOf makes a Pin from a reference and the digest it resolved to.
func PinOf(r Reference, digest string, origin Origin) Pin {
	return Pin{Name: r.Written(), Tag: r.Tag(), Digest: digest, Origin: origin}
}
