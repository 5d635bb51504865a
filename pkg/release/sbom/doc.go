// Package sbom makes the software bill of materials of a frozen workspace template: it catalogs an
// unpacked root filesystem with syft's library and returns an SPDX 2.3 JSON and a CycloneDX 1.6 JSON
// document plus the sorted list of packages found, which the run-manifest index uses to answer
// "which runs used a template containing openssl 3.0.7?".
//
//	s, err := sbom.Generate(ctx, rootfs,
//		sbom.WithDocumentName("minimal"),
//		sbom.WithNamespace("https://slipway.dev/templates/minimal/sha256:…"),
//		sbom.WithCreated(sourceDateEpoch))
//	written, err := s.Write(outDir) // sbom.spdx.json, sbom.cdx.json
//	for _, p := range s.Packages() { … p.Type, p.Name, p.Version, p.PURL … }
//
// Generate is:
//
//   - offline: no cataloger looks anything up on the network (Go module, npm and PyPI licences, Maven
//     parent POMs) or in the host's Go module cache or Maven repository, and no vulnerability data is
//     read; the environment (GOPROXY and the like) does not change the result;
//   - deterministic: the same tree and options give the same bytes, wherever the tree lies on the host
//     and however many goroutines syft uses. The creation time comes from WithCreated (the caller reads
//     SOURCE_DATE_EPOCH; the default is the Unix epoch), the SPDX namespace and CycloneDX serial number
//     from WithNamespace or else from a hash of the document, and every list is sorted;
//   - lean: it runs the catalogers that fit a root filesystem (DefaultCatalogers: dpkg, apk, rpm and
//     alpm databases, Go binaries, installed Python and npm packages, Java archives, well-known tool
//     binaries), without file digests, file metadata or package-to-file relationships, which cost
//     most of syft's time and size on a large tree.
//
// Combine makes the SBOM of a tree that holds trees already catalogued, side by side, from their
// SBOMs, without cataloging again: a release's image, which holds its binaries alone, gets the
// binaries' SBOMs combined, byte for byte what Generate would write for the image's tree.
//
// Reading documents back is pkg/api/sbomdoc's (standard library only, so a runtime reading a
// template's SBOM attestation does not link syft); its Package is the one Packages returns.
//
// It is not a vulnerability scanner, it does not sign or attach the documents (the signing and
// attestation packages do), and it does not unpack images: give it the directory the rootfs package
// extracted. Symbolic links in the tree resolve inside it, as they would in a container.
package sbom
