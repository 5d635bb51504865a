package sbom

import (
	"errors"
	"fmt"
	"maps"
	"reflect"

	"github.com/anchore/syft/syft/artifact"
	"github.com/anchore/syft/syft/pkg"
	syftsbom "github.com/anchore/syft/syft/sbom"
	"github.com/anchore/syft/syft/source"
	"github.com/anchore/syft/syft/source/directorysource"
)

// Combine returns the SBOM of a tree that holds the trees parts were generated from, side by side
// (their files at the same paths, none of them at the same path in two parts), as Generate would
// catalog it with the same catalogers, without cataloging anything again: a release's image holds
// its binaries, whose SBOMs are made already. The packages, the relationships between them and the
// file records are the parts' together; the document's name, namespace and creation time are the
// options' (as Generate's; WithCatalogers and WithParallelism are meaningless here and refused).
//
// What Generate would find beyond the parts' own packages is not found: a cataloger that reads
// several files together (a package database beside the files it owns) gives something else when
// the files were catalogued apart. Combine suits parts whose packages each come from one file, such
// as Go binaries.
func Combine(parts []*SBOM, opts ...Option) (*SBOM, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.parallelism != defaultOptions().parallelism || !reflect.DeepEqual(o.catalogers, DefaultCatalogers()) {
		return nil, fmt.Errorf("%w: combine catalogs nothing: it takes no catalogers or parallelism", ErrInvalidOption)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: combine: no sboms given", ErrInvalidOption)
	}
	// The combined tree's identity, as Generate's directory source would derive it from the
	// document name (never from a path): the source relationships of the parts point to it.
	src, err := directorysource.New(directorysource.Config{Path: "/", Alias: source.Alias{Name: o.name}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCatalog, err)
	}
	root := sourceRef(src.ID())

	s := syftsbom.SBOM{
		Source:     source.Description{ID: string(root), Name: o.name, Metadata: source.DirectoryMetadata{Path: "/"}},
		Descriptor: parts[0].model.Descriptor,
		Artifacts:  syftsbom.Artifacts{Packages: pkg.NewCollection()},
	}
	a := &s.Artifacts
	seen := map[string]int{} // file path → the part that holds it
	for i, p := range parts {
		if p == nil || p.model == nil {
			return nil, fmt.Errorf("%w: combine: sbom %d was not made by Generate", ErrInvalidOption, i+1)
		}
		m := p.model
		if m.Descriptor.Name != s.Descriptor.Name || m.Descriptor.Version != s.Descriptor.Version {
			return nil, fmt.Errorf("%w: combine: sbom %d was made by %s %s, sbom 1 by %s %s", ErrInvalidOption,
				i+1, m.Descriptor.Name, m.Descriptor.Version, s.Descriptor.Name, s.Descriptor.Version)
		}
		for q := range m.Artifacts.Packages.Enumerate() {
			for _, l := range q.Locations.ToSlice() {
				if j, ok := seen[l.RealPath]; ok && j != i {
					return nil, fmt.Errorf("%w: combine: %s is in sboms %d and %d", ErrInvalidOption, l.RealPath, j+1, i+1)
				}
				seen[l.RealPath] = i
			}
			a.Packages.Add(q)
		}
		switch {
		case m.Artifacts.LinuxDistribution == nil:
		case a.LinuxDistribution == nil:
			a.LinuxDistribution = m.Artifacts.LinuxDistribution
		case !reflect.DeepEqual(a.LinuxDistribution, m.Artifacts.LinuxDistribution):
			return nil, fmt.Errorf("%w: combine: sbom %d names another linux distribution (%s) than the others (%s)",
				ErrInvalidOption, i+1, m.Artifacts.LinuxDistribution.PrettyName, a.LinuxDistribution.PrettyName)
		}
		a.FileMetadata = union(a.FileMetadata, m.Artifacts.FileMetadata)
		a.FileDigests = union(a.FileDigests, m.Artifacts.FileDigests)
		a.FileContents = union(a.FileContents, m.Artifacts.FileContents)
		a.FileLicenses = union(a.FileLicenses, m.Artifacts.FileLicenses)
		a.Executables = union(a.Executables, m.Artifacts.Executables)
		a.Unknowns = union(a.Unknowns, m.Artifacts.Unknowns)
		for _, r := range m.Relationships {
			if r.From.ID() == artifact.ID(m.Source.ID) {
				r.From = root
			}
			if r.To.ID() == artifact.ID(m.Source.ID) {
				r.To = root
			}
			s.Relationships = append(s.Relationships, r)
		}
	}
	if s.Descriptor.Name == "" {
		return nil, errors.New("combine: sbom 1 names no tool")
	}
	return encode(&s, o)
}

// sourceRef stands for the catalogued tree in relationships, as syft's own reference to it does.
type sourceRef artifact.ID

func (r sourceRef) ID() artifact.ID { return artifact.ID(r) }

func union[K comparable, V any](dst, src map[K]V) map[K]V {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[K]V, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
