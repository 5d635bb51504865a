package runmanifest

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Query selects runs by the artifacts they used. Every non-empty field must
// match (they combine with AND). Each is an exact identity as the manifest
// records it (a digest, an id, a revision), never a tag.
type Query struct {
	// Template matches workspace_template_id.
	Template string
	// RunnerImage matches runner_image_digest: the runner IMAGE's digest
	// (the generation's runner pin).
	RunnerImage string
	// RunnerBinary matches runner_binary_sha256: the sha256 of the runner
	// BINARY, as pool status and proof evidence show it.
	RunnerBinary string
	// NodeImage matches node_image_id.
	NodeImage string
	// Policy matches policy_revision.
	Policy string
	// SecretVersion matches secret_version: the pinned secret version, its
	// version included ("vault://kv/agents/token#3").
	SecretVersion string
	// Generation matches generation.
	Generation string
	// RequestKey matches request_key: the claim request's key.
	RequestKey string
	// Node matches node_id and RuntimeClass runtime_class (read from the
	// manifest, through an index on each).
	Node, RuntimeClass string
	// Package ("name@version", as in the SBOMs) matches runs whose
	// workspace template, runner image or control-plane image contains
	// that package.
	Package string
	// RunIDPrefix matches run_id by its beginning (an id typed short).
	RunIDPrefix string
	// Limit caps the number of run ids returned; 0 means all.
	Limit int
}

// Empty reports whether q sets no criterion (Limit is none): such a query
// would list every run, and stores refuse it.
func (q Query) Empty() bool {
	return q == Query{Limit: q.Limit}
}

// Package is one package of a workspace template's SBOM, as the package
// query names it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String is "name@version".
func (p Package) String() string { return p.Name + "@" + p.Version }

// ParsePackage parses "name@version". The version is what follows the last
// '@', so scoped npm names work: "@babel/core@7.24.0" is @babel/core at 7.24.0.
// Errors wrap ErrInvalid.
func ParsePackage(s string) (Package, error) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || i == len(s)-1 {
		return Package{}, fmt.Errorf("%w: package %q: want name@version", ErrInvalid, SafeID(s))
	}
	p := Package{Name: s[:i], Version: s[i+1:]}
	if err := p.Validate(); err != nil {
		return Package{}, err
	}
	return p, nil
}

// Validate checks p as a store records it: a name and a version, each
// printable (names may hold spaces) and at most 512 bytes, and no '@' in
// the version. Errors wrap ErrInvalid.
func (p Package) Validate() error {
	if p.Name == "" || p.Version == "" {
		return fmt.Errorf("%w: package %q: name and version are required", ErrInvalid, SafeID(p.String()))
	}
	if strings.ContainsRune(p.Version, '@') {
		return fmt.Errorf("%w: package %q: the version holds '@'", ErrInvalid, SafeID(p.String()))
	}
	// names may hold spaces (some SBOM catalogers make such names), never
	// control characters
	for _, v := range []string{p.Name, p.Version} {
		if len(v) > maxField || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("%w: package %q: not a printable name or version of at most %d bytes", ErrInvalid, SafeID(p.String()), maxField)
		}
	}
	return nil
}

// Change says what a write did.
type Change string

// What a write did: recorded something new, replaced what was there, or
// found it recorded already and changed nothing.
const (
	Created   Change = "created"
	Updated   Change = "updated"
	Unchanged Change = "unchanged"
)
