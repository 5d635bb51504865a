package sbom

import (
	"github.com/anchore/syft/syft"
	"github.com/anchore/syft/syft/cataloging"

	// the rpm-db-cataloger reads RPM's sqlite database through database/sql and refuses to run
	// without a driver named "sqlite"; this is the pure-Go one the syft CLI and Slipway's stores use
	_ "modernc.org/sqlite"
)

// SyftVersion is the version of syft's library that Generate uses, as the documents name it. A test
// keeps it equal to the version in go.mod (syft reads it from build information, which test and
// stripped binaries lack).
const SyftVersion = "v1.57.1"

// syftConfig turns the options into syft's configuration: the chosen catalogers, no file catalogers,
// no network and no host paths.
//
// Offline: syft looks things up on the network only where a cataloger's configuration asks it to (Go
// module licences from a Go proxy, Java parent POMs from Maven Central, npm and PyPI licences), and the
// Go module file cataloger runs the go tool when UsePackagesLib is set. All of those are switched off
// here whatever syft's defaults are, and the host's Go module cache, vendor folders and Maven
// repository, which would make the result depend on the machine, are not searched. No vulnerability
// data is involved: syft catalogs, grype matches.
//
// Lean: file catalogers (digests of every owned file, file metadata, executable analysis, contents)
// are off, and so are package-to-file relationships and unknowns, which list thousands of files and
// are not needed to index packages. Relationships between packages stay, and so does the removal of
// binary-classifier packages whose files an OS package owns (busybox from dpkg is a deb, not twice).
func syftConfig(o options) *syft.CreateSBOMConfig {
	cfg := syft.DefaultCreateSBOMConfig().
		WithTool("syft", SyftVersion).
		WithoutFiles().
		WithParallelism(o.parallelism).
		WithCatalogerSelection(cataloging.NewSelectionRequest().WithDefaults(o.catalogers...)).
		WithRelationshipsConfig(cataloging.RelationshipsConfig{
			PackageFileOwnership:                          false,
			PackageFileOwnershipOverlap:                   true,
			ExcludeBinaryPackagesWithFileOwnershipOverlap: true,
		}).
		WithUnknownsConfig(cataloging.UnknownsConfig{
			RemoveWhenPackagesDefined: true,
		}).
		WithLicenseConfig(licenseConfig())

	p := cfg.Packages
	p.Golang.SearchRemoteLicenses = false
	p.Golang.SearchLocalModCacheLicenses = false
	p.Golang.SearchLocalVendorLicenses = false
	p.Golang.LocalModCacheDir = ""
	p.Golang.LocalVendorDir = ""
	p.Golang.Proxies = nil // from GOPROXY by default: host detail, and unused offline
	p.Golang.NoProxy = nil
	p.Golang.UsePackagesLib = false
	p.JavaArchive.UseNetwork = false
	p.JavaArchive.UseMavenLocalRepository = false
	p.JavaArchive.MavenLocalRepositoryDir = ""
	p.JavaArchive.ResolveTransitiveDependencies = false
	p.JavaScript.SearchRemoteLicenses = false
	p.Python.SearchRemoteLicenses = false
	p.Python.GuessUnpinnedRequirements = false
	cfg.Packages = p

	if o.configHook != nil {
		o.configHook(cfg)
	}
	return cfg
}

// licenseConfig: licences are identified (syft's default coverage) but their texts are not copied
// into the documents.
func licenseConfig() cataloging.LicenseConfig {
	return cataloging.LicenseConfig{
		IncludeContent: cataloging.LicenseContentExcludeAll,
		Coverage:       cataloging.DefaultLicenseConfig().Coverage,
	}
}
