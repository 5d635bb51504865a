package attest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	prov "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// BuildTypeGoRelease is the SLSA buildType of a release of Go programs built
// from a git commit (Slipway's own release: slipway release).
const BuildTypeGoRelease = "https://slipway.dev/go-release/v1"

var gitCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Subject is one artifact a statement is about.
type Subject struct {
	Name   string // file name or image reference
	Digest string // sha256:<hex>
}

// GoRelease describes the build of a release's programs from one commit.
type GoRelease struct {
	Subjects  []Subject         // the artifacts built; order does not matter
	Source    string            // repository URI, e.g. git+https://github.com/slipway-dev/slipway
	Commit    string            // the 40-hex git commit built
	Version   string            // the release version stamped into the programs
	Packages  []string          // the main packages built (./cmd/slipway, …)
	Platforms []string          // os/arch
	GoVersion string            // the Go toolchain (go1.26.8)
	Flags     []string          // go build's flags, as given
	Env       map[string]string // go build's environment that changes the output (CGO_ENABLED, …)
	Inputs    []Subject         // further inputs (the binaries an image holds); optional
	BuilderID string            // runDetails.builder.id
	Epoch     int64             // SOURCE_DATE_EPOCH (the commit's time)
	Dirty     bool              // built from a tree with uncommitted changes (a snapshot)
}

// GoReleaseProvenance builds an in-toto Statement v1 with SLSA provenance v1
// for r: externalParameters hold source, commit, version, packages and
// platforms; internalParameters the Go version, flags, environment and
// sourceDateEpoch; resolvedDependencies the source at its commit (digest
// gitCommit) and then the inputs sorted by name. Equal releases give equal
// statements: no time of the build is recorded, only the epoch.
func GoReleaseProvenance(r GoRelease) (*intoto.Statement, error) {
	if len(r.Subjects) == 0 {
		return nil, fmt.Errorf("%w: GoRelease.Subjects: required", ErrValidation)
	}
	if !gitCommit.MatchString(r.Commit) {
		return nil, fmt.Errorf("%w: GoRelease.Commit: %q is not a 40-hex git commit", ErrValidation, r.Commit)
	}
	if strings.TrimSpace(r.BuilderID) == "" || r.Source == "" || r.Version == "" || r.GoVersion == "" {
		return nil, fmt.Errorf("%w: GoRelease: BuilderID, Source, Version and GoVersion are required", ErrValidation)
	}
	if r.Epoch < 0 || r.Epoch > maxEpoch {
		return nil, fmt.Errorf("%w: GoRelease.Epoch: %d out of range", ErrValidation, r.Epoch)
	}
	subjects, err := descriptors("Subjects", r.Subjects)
	if err != nil {
		return nil, err
	}
	inputs, err := descriptors("Inputs", r.Inputs)
	if err != nil {
		return nil, err
	}
	deps := append([]*intoto.ResourceDescriptor{{Uri: r.Source + "@" + r.Commit, Digest: map[string]string{"gitCommit": r.Commit}}}, inputs...)
	ext, err := structpb.NewStruct(map[string]any{
		"source": r.Source, "commit": r.Commit, "version": r.Version,
		"packages": strs(r.Packages), "platforms": strs(r.Platforms), "dirty": r.Dirty,
	})
	if err != nil {
		return nil, fmt.Errorf("attest: externalParameters: %w", err)
	}
	env := map[string]any{}
	for k, v := range r.Env {
		env[k] = v
	}
	internal, err := structpb.NewStruct(map[string]any{
		"goVersion": r.GoVersion, "flags": strs(r.Flags), "env": env, "sourceDateEpoch": float64(r.Epoch),
	})
	if err != nil {
		return nil, fmt.Errorf("attest: internalParameters: %w", err)
	}
	p := &prov.Provenance{
		BuildDefinition: &prov.BuildDefinition{
			BuildType:            BuildTypeGoRelease,
			ExternalParameters:   ext,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &prov.RunDetails{Builder: &prov.Builder{Id: r.BuilderID}},
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: provenance: %w", ErrValidation, err)
	}
	pred, err := toStruct(p)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{Type: StatementType, Subject: subjects, PredicateType: PredicateSLSAProvenanceV1, Predicate: pred}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	return st, nil
}

// descriptors turns subjects into resource descriptors sorted by name,
// refusing a name listed twice.
func descriptors(field string, in []Subject) ([]*intoto.ResourceDescriptor, error) {
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b Subject) int { return strings.Compare(a.Name, b.Name) })
	var out []*intoto.ResourceDescriptor
	for i, x := range s {
		if x.Name == "" || (i > 0 && s[i-1].Name == x.Name) {
			return nil, fmt.Errorf("%w: GoRelease.%s: empty or repeated name %q", ErrValidation, field, x.Name)
		}
		h, err := digestHex("GoRelease."+field+"["+x.Name+"]", x.Digest)
		if err != nil {
			return nil, err
		}
		out = append(out, &intoto.ResourceDescriptor{Name: x.Name, Digest: map[string]string{"sha256": h}})
	}
	return out, nil
}

func strs(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}
