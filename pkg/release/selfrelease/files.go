package selfrelease

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Files a release writes beside the binaries and SBOMs.
const (
	ChecksumsFile  = "checksums.txt"
	SignatureFile  = "checksums.txt.sig" // cosign sign-blob's format: base64 of the signature
	ProvenanceFile = "provenance.intoto.json"
	EnvelopeFile   = "provenance.intoto.dsse.json" // the provenance signed, a DSSE envelope
	PolicyFile     = "verification-policy.yaml"
)

// provenance is the SLSA provenance statement (marshalled) of artifacts
// built from the release's source, with inputs.
func (r *run) provenance(subjects, inputs []attest.Subject) ([]byte, error) {
	pkgs := make([]string, len(r.o.Programs))
	for i, p := range r.o.Programs {
		pkgs[i] = "./cmd/" + p
	}
	st, err := attest.GoReleaseProvenance(attest.GoRelease{
		Subjects: subjects, Inputs: inputs,
		Source: Source, Commit: r.src.commit, Version: r.o.Version, Dirty: r.res.Dirty,
		Packages: pkgs, Platforms: r.o.Platforms, GoVersion: r.res.GoVersion,
		Flags: buildFlags(r.o.Version, r.src.commit, r.res.Dirty), Env: envMap(buildEnv("$GOOS", "$GOARCH")),
		BuilderID: BuilderID, Epoch: r.src.epoch.Unix(),
	})
	if err != nil {
		return nil, err
	}
	return attest.Marshal(st)
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// files writes the binaries' provenance (signed when there is a key), the
// checksums of everything in Out but the layout, their signature, and the
// verification policy.
func (r *run) files(ctx context.Context) error {
	var subjects []attest.Subject
	for _, b := range r.res.Binaries {
		subjects = append(subjects, attest.Subject{Name: b.File, Digest: "sha256:" + b.SHA256})
	}
	prov, err := r.provenance(subjects, nil)
	if err != nil {
		return err
	}
	if err := r.write(ProvenanceFile, prov); err != nil {
		return err
	}
	r.res.Provenance = ProvenanceFile
	if r.o.Signer != nil {
		env, err := sign.SignEnvelope(ctx, r.o.Signer, prov)
		if err != nil {
			return err
		}
		if err := r.write(EnvelopeFile, env); err != nil {
			return err
		}
	}
	sums, err := r.checksums()
	if err != nil {
		return err
	}
	if err := r.write(ChecksumsFile, sums); err != nil {
		return err
	}
	r.res.Checksums = ChecksumsFile
	if r.o.Signer == nil {
		return nil
	}
	sig, err := sign.SignBlob(r.o.Signer, sums)
	if err != nil {
		return fmt.Errorf("sign %s: %w", ChecksumsFile, err)
	}
	if err := r.write(SignatureFile, sig); err != nil {
		return err
	}
	r.res.Signature = SignatureFile
	pub, err := sign.PublicKeyPEM(r.o.Signer)
	if err != nil {
		return err
	}
	if err := r.write(PolicyFile, Policy(pub, r.o.Repository, r.o.Programs)); err != nil {
		return err
	}
	r.res.Policy = PolicyFile
	return nil
}

// checksums is checksums.txt as GoReleaser writes it: "<sha256>  <file>"
// per file, sorted by name, for every file of Out but the layout and the
// signatures.
func (r *run) checksums() ([]byte, error) {
	entries, err := os.ReadDir(r.o.Out)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range entries {
		// Signatures are left out: they verify themselves, and ECDSA's
		// differ each time, which would make two releases' checksums differ.
		if !e.Type().IsRegular() || e.Name() == ChecksumsFile || e.Name() == SignatureFile || e.Name() == EnvelopeFile {
			continue
		}
		sum, err := r.sha256Of(e.Name())
		if err != nil {
			return nil, err
		}
		lines = append(lines, sum+"  "+e.Name()+"\n")
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return []byte(strings.Join(lines, "")), nil
}

func (r *run) write(name string, b []byte) error {
	return os.WriteFile(filepath.Join(r.o.Out, name), b, 0o644)
}

// Policy is the verification policy of a release signed with the key pub
// whose images are REPOSITORY/<program>: signed by that key, with SLSA
// provenance from BuilderID (build type attest.BuildTypeGoRelease) and an
// SPDX SBOM attested by it. An image built anywhere else, or by anything
// else, is refused.
func Policy(pub []byte, repository string, programs []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata:
  name: slipway-release
spec:
  transparencyLog: none
  keys:
    - name: slipway-release
      publicKey: |
`)
	for _, l := range strings.Split(strings.TrimSpace(string(pub)), "\n") {
		fmt.Fprintf(&b, "        %s\n", l)
	}
	fmt.Fprintf(&b, "  rules:\n    - name: slipway-images\n      match:\n        repositories:\n")
	for _, p := range programs {
		fmt.Fprintf(&b, "          - %s/%s\n", repository, p)
	}
	fmt.Fprintf(&b, `      signatures:
        keys: [slipway-release]
      attestations:
        - type: slsaprovenance
          keys: [slipway-release]
          builderID: %s
          buildType: %s
        - type: spdx
          keys: [slipway-release]
`, BuilderID, attest.BuildTypeGoRelease)
	return []byte(b.String())
}

// sha256Of is the hex sha256 of the file of Out named: a binary's is the
// one read when it was built (the binaries are most of a release's bytes:
// hashing them twice was time on B17's critical path), any other file's
// is read now.
func (r *run) sha256Of(name string) (string, error) {
	for _, b := range r.res.Binaries {
		if b.File == name {
			return b.SHA256, nil
		}
	}
	sum, _, err := fileSHA256(filepath.Join(r.o.Out, name))
	return sum, err
}
