package sbom

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/anchore/syft/syft"
	syftsbom "github.com/anchore/syft/syft/sbom"
	"github.com/anchore/syft/syft/source"
	"github.com/anchore/syft/syft/source/directorysource"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/api/sbomdoc"
)

// File names Write uses.
const (
	SPDXFileName      = "sbom.spdx.json"
	CycloneDXFileName = "sbom.cdx.json"
)

// Errors, for errors.Is.
var (
	// ErrInvalidOption: an Option was given a value it refuses.
	ErrInvalidOption = errors.New("invalid sbom option")
	// ErrInvalidRoot: the root filesystem is missing or not a directory.
	ErrInvalidRoot = errors.New("invalid root filesystem")
	// ErrCatalog: syft could not catalog or encode the root filesystem.
	ErrCatalog = errors.New("sbom cataloging failed")
)

// SBOM is the result of Generate: the two documents and the package list. It is immutable.
type SBOM struct {
	spdx     []byte
	cdx      []byte
	packages []sbomdoc.Package
	model    *syftsbom.SBOM // what syft found, for Combine; never changed
}

// Generate catalogs the unpacked root filesystem at root with syft's library and returns its SPDX 2.3
// and CycloneDX 1.6 JSON documents. Symbolic links resolve inside root, as they would in the image.
// The documents depend only on the tree's contents and the options, never on the host path, the
// clock or the run.
func Generate(ctx context.Context, root string, opts ...Option) (*SBOM, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := rootDir(root)
	if err != nil {
		return nil, err
	}

	src, err := directorysource.New(directorysource.Config{
		Path:  dir,
		Base:  dir,
		Alias: source.Alias{Name: o.name},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCatalog, root, err)
	}
	defer src.Close()

	cfg := syftConfig(o)
	// syft compiles its licence matcher (about a second of CPU) and then indexes the tree; do both
	// at once, unless Prepare compiled the matcher already. The source keeps its index, and CreateSBOM
	// uses a matcher it finds in the context.
	scanned := make(chan error, 1)
	scanCtx := ctx
	go func() {
		var err error
		scanCtx, err = Prepare(ctx)
		scanned <- err
	}()
	_, indexErr := src.FileResolver(cfg.Search.Scope)
	if err := cmp.Or(<-scanned, indexErr); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCatalog, root, err)
	}

	s, err := syft.CreateSBOM(scanCtx, src, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCatalog, root, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// describe the tree as the filesystem root it is, so no host path reaches the documents
	s.Source = source.Description{
		ID:       s.Source.ID,
		Name:     o.name,
		Metadata: source.DirectoryMetadata{Path: "/"},
	}

	return encode(s, o)
}

// encode makes the documents of s as o says, and keeps s for Combine.
func encode(s *syftsbom.SBOM, o options) (*SBOM, error) {
	out := &SBOM{packages: packagesOf(s), model: s}
	m := docMeta{name: o.name, namespace: o.namespace, created: o.created}
	if m.namespace == "" {
		// derived from the document itself: encode it without a namespace and hash that
		probe, err := encodeSPDX(*s, m)
		if err != nil {
			return nil, err
		}
		m.namespace = derivedNamespace(o.name, probe)
	}
	var err error
	if out.spdx, err = encodeSPDX(*s, m); err != nil {
		return nil, err
	}
	if out.cdx, err = encodeCycloneDX(*s, m); err != nil {
		return nil, err
	}
	return out, nil
}

// preparedKey marks a context that carries syft's compiled licence matcher.
type preparedKey struct{}

// Prepare returns a context carrying syft's compiled licence matcher, so that Generate calls made
// with it, or with contexts derived from it, skip compiling their own: about a second of CPU that
// otherwise lies on every Generate's critical path. A template build calls it when the build starts,
// so that the compile overlaps the build steps; several Generate calls may share the context at
// once. Given a prepared context, it returns it unchanged.
func Prepare(ctx context.Context) (context.Context, error) {
	if ctx.Value(preparedKey{}) != nil {
		return ctx, nil
	}
	ctx, err := syft.SetContextLicenseScanner(ctx, licenseConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: licence matcher: %w", ErrCatalog, err)
	}
	return context.WithValue(ctx, preparedKey{}, true), nil
}

func rootDir(root string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("%w: empty path", ErrInvalidRoot)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidRoot, root, err)
	}
	// the tree itself may be reached through a link; links inside it resolve against it
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidRoot, root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidRoot, root, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", ErrInvalidRoot, root)
	}
	return abs, nil
}

// packagesOf lists the packages sorted by name, version, type and purl, without exact duplicates (the
// same npm package in two node_modules folders is one entry).
func packagesOf(s *syftsbom.SBOM) []sbomdoc.Package {
	var out []sbomdoc.Package
	for p := range s.Artifacts.Packages.Enumerate() {
		out = append(out, sbomdoc.Package{Name: p.Name, Version: p.Version, Type: string(p.Type), PURL: p.PURL})
	}
	return sbomdoc.Sorted(out)
}

// SPDXJSON returns the SPDX 2.3 JSON document.
func (s *SBOM) SPDXJSON() []byte { return bytes.Clone(s.spdx) }

// CycloneDXJSON returns the CycloneDX 1.6 JSON document.
func (s *SBOM) CycloneDXJSON() []byte { return bytes.Clone(s.cdx) }

// Packages returns the packages found, sorted by name, version, type and purl.
func (s *SBOM) Packages() []sbomdoc.Package { return slices.Clone(s.packages) }

// Change says what Write did to a file.
type Change string

// The changes Write reports.
const (
	Created   Change = "created"
	Updated   Change = "updated"
	Unchanged Change = "unchanged"
)

// Written describes one file Write wrote.
type Written struct {
	Path   string `json:"path"`
	Digest string `json:"digest"` // sha256:<hex> of the bytes
	Size   int64  `json:"size"`
	Change Change `json:"change"`
}

// Write writes sbom.spdx.json and sbom.cdx.json into dir, creating dir if needed. Each file is
// replaced atomically and only when its bytes differ, so writing the same SBOM twice changes nothing.
func (s *SBOM) Write(dir string) ([]Written, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sbom directory %s: %w", dir, err)
	}
	var out []Written
	for _, f := range []struct {
		name string
		data []byte
	}{{SPDXFileName, s.spdx}, {CycloneDXFileName, s.cdx}} {
		w, err := writeFile(filepath.Join(dir, f.name), f.data)
		if err != nil {
			return out, err
		}
		out = append(out, w)
	}
	return out, nil
}

func writeFile(path string, data []byte) (Written, error) {
	sum := sha256.Sum256(data)
	w := Written{Path: path, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data)), Change: Created}
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		w.Change = Unchanged
		return w, nil
	case err == nil:
		w.Change = Updated
	case !errors.Is(err, os.ErrNotExist):
		return w, fmt.Errorf("read %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return w, err
	}
	return w, nil
}
