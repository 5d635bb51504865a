package attest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	prov "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BuildTypeTemplate is the SLSA buildType of a Slipway workspace-template build.
const BuildTypeTemplate = "https://slipway.dev/template-build/v1"

// maxEpoch is the largest SOURCE_DATE_EPOCH that survives the float64 of a
// JSON number inside a structpb.Struct exactly (2^53).
const maxEpoch = 1 << 53

// Input is one file copied into a template image.
type Input struct {
	Path   string // path of the input as the spec names it
	Digest string // sha256:<hex> of its content
}

// TemplateBuild describes one template build, as the release flow knows it.
type TemplateBuild struct {
	Name       string  // template name
	TemplateID string  // sha256:<hex> digest of the frozen template image
	Ref        string  // published reference, e.g. registry/repo@sha256:…; optional
	SpecDigest string  // sha256:<hex> of the template spec
	SpecSource string  // where the spec came from (path or URL); optional
	BaseRef    string  // base image reference; empty with BaseDigest for a build from scratch
	BaseDigest string  // sha256:<hex> of the base image
	Inputs     []Input // every copied input; order does not matter

	BuilderID    string // runDetails.builder.id, from configuration
	InvocationID string // optional
	Started      time.Time
	Finished     time.Time
	Epoch        int64 // SOURCE_DATE_EPOCH the build was frozen with
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: TemplateBuild.%s: %s", ErrValidation, field, fmt.Sprintf(format, args...))
}

// Provenance builds an in-toto Statement v1 whose subject is the template
// image and whose predicate is SLSA provenance v1 for the build b.
// externalParameters holds "template" (b.Name), "source" (b.SpecSource, when
// set) and "specDigest" as a DigestSet {"sha256": hex}; internalParameters
// holds "sourceDateEpoch". resolvedDependencies lists the base image as
// uri "oci://"+BaseRef with its digest, then every input (name = path),
// sorted by path, so equal builds give equal statements.
func Provenance(b TemplateBuild) (*intoto.Statement, error) {
	if b.Name == "" {
		return nil, invalid("Name", "required")
	}
	imageHex, err := digestHex("TemplateBuild.TemplateID", b.TemplateID)
	if err != nil {
		return nil, err
	}
	specHex, err := digestHex("TemplateBuild.SpecDigest", b.SpecDigest)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.BuilderID) == "" {
		return nil, invalid("BuilderID", "required (runDetails.builder.id)")
	}
	if b.Epoch < 0 || b.Epoch > maxEpoch {
		return nil, invalid("Epoch", "%d out of range [0, 2^53]", b.Epoch)
	}
	if !b.Started.IsZero() && !b.Finished.IsZero() && b.Finished.Before(b.Started) {
		return nil, invalid("Finished", "%s is before Started %s", b.Finished.UTC().Format(time.RFC3339Nano), b.Started.UTC().Format(time.RFC3339Nano))
	}

	deps, err := dependencies(b)
	if err != nil {
		return nil, err
	}

	ext := map[string]any{
		"template":   b.Name,
		"specDigest": map[string]any{"sha256": specHex},
	}
	if b.SpecSource != "" {
		ext["source"] = b.SpecSource
	}
	extStruct, err := structpb.NewStruct(ext)
	if err != nil {
		return nil, fmt.Errorf("attest: externalParameters: %w", err)
	}
	intStruct, err := structpb.NewStruct(map[string]any{"sourceDateEpoch": float64(b.Epoch)})
	if err != nil {
		return nil, fmt.Errorf("attest: internalParameters: %w", err)
	}

	meta := &prov.BuildMetadata{InvocationId: b.InvocationID}
	if !b.Started.IsZero() {
		meta.StartedOn = timestamppb.New(b.Started)
	}
	if !b.Finished.IsZero() {
		meta.FinishedOn = timestamppb.New(b.Finished)
	}
	p := &prov.Provenance{
		BuildDefinition: &prov.BuildDefinition{
			BuildType:            BuildTypeTemplate,
			ExternalParameters:   extStruct,
			InternalParameters:   intStruct,
			ResolvedDependencies: deps,
		},
		RunDetails: &prov.RunDetails{
			Builder:  &prov.Builder{Id: b.BuilderID},
			Metadata: meta,
		},
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: provenance: %w", ErrValidation, err)
	}
	pred, err := toStruct(p)
	if err != nil {
		return nil, err
	}
	name := b.Ref
	if name == "" {
		name = b.Name
	}
	st := &intoto.Statement{
		Type:          StatementType,
		Subject:       []*intoto.ResourceDescriptor{{Name: name, Digest: map[string]string{"sha256": imageHex}}},
		PredicateType: PredicateSLSAProvenanceV1,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%w: statement: %w", ErrValidation, err)
	}
	return st, nil
}

// dependencies lists the base image (when there is one) and every input,
// sorted by path, as resource descriptors.
func dependencies(b TemplateBuild) ([]*intoto.ResourceDescriptor, error) {
	var deps []*intoto.ResourceDescriptor
	switch {
	case b.BaseRef == "" && b.BaseDigest == "":
		// built from scratch: no base image dependency
	case b.BaseRef == "":
		return nil, invalid("BaseRef", "required when BaseDigest is set")
	default:
		h, err := digestHex("TemplateBuild.BaseDigest", b.BaseDigest)
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{
			Uri:    "oci://" + b.BaseRef,
			Digest: map[string]string{"sha256": h},
		})
	}
	inputs := slices.Clone(b.Inputs)
	slices.SortFunc(inputs, func(x, y Input) int { return strings.Compare(x.Path, y.Path) })
	for i, in := range inputs {
		if in.Path == "" {
			return nil, invalid("Inputs", "an input with digest %q has no Path", in.Digest)
		}
		if i > 0 && inputs[i-1].Path == in.Path {
			return nil, invalid("Inputs", "path %q listed twice", in.Path)
		}
		h, err := digestHex(fmt.Sprintf("TemplateBuild.Inputs[%q].Digest", in.Path), in.Digest)
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{
			Name:   in.Path,
			Digest: map[string]string{"sha256": h},
		})
	}
	return deps, nil
}

// toStruct converts a predicate message into the Struct a Statement carries,
// through its protojson (camelCase) form.
func toStruct(p *prov.Provenance) (*structpb.Struct, error) {
	raw, err := protojson.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("attest: encode provenance: %w", err)
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("attest: provenance as struct: %w", err)
	}
	return s, nil
}

// ProvenanceOf reads the SLSA provenance v1 predicate of st back into its
// typed form and validates it. A statement of another predicate type is
// refused with ErrPredicateType. Unknown predicate fields are ignored.
func ProvenanceOf(st *intoto.Statement) (*prov.Provenance, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: statement: nil", ErrValidation)
	}
	if st.GetPredicateType() != PredicateSLSAProvenanceV1 {
		return nil, fmt.Errorf("%w: predicateType: got %q, want %q", ErrPredicateType, st.GetPredicateType(), PredicateSLSAProvenanceV1)
	}
	if st.GetPredicate() == nil {
		return nil, fmt.Errorf("%w: predicate: required", ErrValidation)
	}
	raw, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("attest: encode predicate: %w", err)
	}
	p := &prov.Provenance{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("%w: predicate: %w", ErrValidation, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: predicate: %w", ErrValidation, err)
	}
	return p, nil
}
