package generation

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/strictyaml"
)

// Document identity.
const (
	APIVersion   = "slipway.dev/v1alpha1"
	DocumentKind = "Generation"
)

// MaxSize bounds a generation document.
const MaxSize = 1 << 20

// MaxProtocol bounds a protocol version in Compatibility.
const MaxProtocol = math.MaxInt32

var (
	// ErrInvalid marks a generation that does not parse or validate; the
	// message names file:line (when there is a file) and the field.
	ErrInvalid = errors.New("invalid generation")
	// ErrUnchanged is New's answer when the new pins and compatibility are
	// those of the generation it starts from: there is nothing to create.
	ErrUnchanged = errors.New("generation unchanged")
)

// Generation is an immutable, content-addressed set of pins for one pool.
// Its ID is computed from Pool, Pins and Compatibility (see ComputeID);
// Sequence and Verification are not part of it.
type Generation struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
	// ID is "g-" + 64 hex digits, the hash of the content.
	ID string `yaml:"id" json:"id"`
	// Pool is the pool the generation is for.
	Pool string `yaml:"pool" json:"pool"`
	// Sequence is a human ordering within the pool: the previous
	// generation's plus 1, 1 for the first.
	Sequence int64 `yaml:"sequence" json:"sequence"`
	// Pins are the artifacts, at most one per kind.
	Pins Pins `yaml:"pins" json:"pins"`
	// Compatibility is which protocol versions the generation works with.
	Compatibility Compatibility `yaml:"compatibility" json:"compatibility"`
	// Verification records what was verified when the generation was
	// created; nil when nothing was. It is a record, not a proof: it is not
	// hashed, and whoever relies on the pins verifies them again.
	Verification *Verification `yaml:"verification,omitempty" json:"verification,omitempty"`

	// File is where the generation was read from ("" when parsed from bytes).
	File string `yaml:"-" json:"-"`
	doc  *strictyaml.Doc
}

// Pins maps each pinned artifact kind to its pin. It marshals to YAML in
// the order of Kinds.
type Pins map[Kind]Pin

// MarshalYAML writes the pins in the order of Kinds (unknown kinds last, sorted).
func (ps Pins) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range sortedKinds(ps) {
		var v yaml.Node
		if err := v.Encode(ps[k]); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: string(k)}, &v)
	}
	return n, nil
}

// sortedKinds lists the keys of ps in the order of Kinds, unknown kinds
// last in lexical order.
func sortedKinds[V any](ps map[Kind]V) []Kind {
	out := make([]Kind, 0, len(ps))
	for k := range ps {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return kindLess(out[i], out[j]) })
	return out
}

func kindLess(a, b Kind) bool {
	ia, ib := a.index(), b.index()
	if ia < 0 {
		ia = len(kinds)
	}
	if ib < 0 {
		ib = len(kinds)
	}
	if ia != ib {
		return ia < ib
	}
	return a < b
}

// Compatibility says which protocol versions a generation works with.
type Compatibility struct {
	// ControlPlaneProtocol is the range of control-plane protocol versions
	// that understand this generation; a control plane serving it (and,
	// during a rollout, the one before it) must speak one of them.
	ControlPlaneProtocol Range `yaml:"controlPlaneProtocol" json:"controlPlaneProtocol"`
	// RunnerProtocol is the range of runner protocol versions the
	// generation's runner speaks with the control plane.
	RunnerProtocol Range `yaml:"runnerProtocol" json:"runnerProtocol"`
}

// Range is an inclusive range of protocol versions, 1 <= Min <= Max <= MaxProtocol.
type Range struct {
	Min int `yaml:"min" json:"min"`
	Max int `yaml:"max" json:"max"`
}

// Contains reports whether v is in r.
func (r Range) Contains(v int) bool { return r.Min <= v && v <= r.Max }

// Overlaps reports whether some version is in both r and o: whether one
// peer can serve a generation of each.
func (r Range) Overlaps(o Range) bool { return r.Min <= o.Max && o.Min <= r.Max }

func (r Range) String() string { return fmt.Sprintf("%d..%d", r.Min, r.Max) }

// Verification records what was verified when a generation was created.
type Verification struct {
	// Policy is the verification policy the pins were checked against.
	Policy PolicyRecord `yaml:"policy" json:"policy"`
	// VerifiedAt is when.
	VerifiedAt time.Time `yaml:"verifiedAt" json:"verifiedAt"`
	// Artifacts are the image pins verified, with what proved them.
	Artifacts []VerifiedArtifact `yaml:"artifacts,omitempty" json:"artifacts,omitempty"`
}

// PolicyRecord names a verification policy and the sha256 of its file.
type PolicyRecord struct {
	Name   string `yaml:"name" json:"name"`
	Digest string `yaml:"digest" json:"digest"`
}

// VerifiedArtifact is what verified one image pin.
type VerifiedArtifact struct {
	Kind Kind `yaml:"kind" json:"kind"`
	// Digest is the pin's digest ("sha256:<hex>").
	Digest string `yaml:"digest" json:"digest"`
	// Signatures reference the verified signatures (the digests of their
	// signature layers, or another reference the verifier gives).
	Signatures []string `yaml:"signatures,omitempty" json:"signatures,omitempty"`
	// Attestations are the verified attestations.
	Attestations []AttestationRecord `yaml:"attestations,omitempty" json:"attestations,omitempty"`
}

// AttestationRecord is one verified attestation: its predicate type and
// the digest of its envelope.
type AttestationRecord struct {
	PredicateType string `yaml:"predicateType" json:"predicateType"`
	Digest        string `yaml:"digest" json:"digest"`
}

// Load reads and validates a generation file; errors name file:line.
func Load(file string) (*Generation, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("generation: %w", err)
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", file, ErrInvalid, fi.Size(), MaxSize)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("generation: %w", err)
	}
	return parse(b, file)
}

// Parse decodes and validates a generation document: strictly (unknown
// fields refused), and its id must be the id of its content. It does not
// know the pool's required kinds: see Validate.
func Parse(b []byte) (*Generation, error) { return parse(b, "") }

// ParseNamed is Parse with name (a path in a config repository, say) in
// its errors.
func ParseNamed(b []byte, name string) (*Generation, error) { return parse(b, name) }

func parse(b []byte, file string) (*Generation, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", displayName(file), ErrInvalid, len(b), MaxSize)
	}
	g := &Generation{File: file}
	doc, err := strictyaml.Decode(b, g)
	if err != nil {
		var e *strictyaml.Error
		if errors.As(err, &e) {
			return nil, fmt.Errorf("%s:%d: %w: %s", displayName(file), e.Line, ErrInvalid, e.Msg)
		}
		return nil, fmt.Errorf("%s: %w: %v", displayName(file), ErrInvalid, err)
	}
	g.doc = doc
	if err := g.validate(true); err != nil {
		return nil, err
	}
	return g, nil
}

func displayName(file string) string {
	if file == "" {
		return "<generation>"
	}
	return file
}

// Validate checks g as Parse does and that every kind in required is
// pinned; the error names all missing kinds.
func (g *Generation) Validate(required []Kind) error {
	if err := g.validate(true); err != nil {
		return err
	}
	var missing []string
	for _, k := range required {
		if !k.Valid() {
			return fmt.Errorf("%w: required kind %q is not an artifact kind (one of %s)", ErrInvalid, k, kindList())
		}
	}
	for _, k := range Kinds() {
		if _, ok := g.Pins[k]; !ok && slices.Contains(required, k) {
			missing = append(missing, string(k))
		}
	}
	if len(missing) > 0 {
		return g.fieldError("pins", "missing %s: pool %s requires them", strings.Join(missing, ", "), g.Pool)
	}
	return nil
}

// fieldError names file:line (when g was parsed) and the field.
func (g *Generation) fieldError(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if g.doc == nil {
		return fmt.Errorf("generation: %s: %w: %s", field, ErrInvalid, msg)
	}
	return fmt.Errorf("%s:%d: %s: %w: %s", displayName(g.File), g.doc.Line(field), field, ErrInvalid, msg)
}

var (
	// poolName is an RFC 1123 label, usable as a directory, a label value
	// and a namespace name.
	poolName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// policyName is package policy's metadata.name.
	policyName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)
	idPattern  = regexp.MustCompile(`^g-[0-9a-f]{64}$`)
)

// validate checks everything Parse checks; requireID says an empty id is
// refused rather than left to be computed.
func (g *Generation) validate(requireID bool) error {
	if g.APIVersion != APIVersion {
		return g.fieldError("apiVersion", "%q, want %q", g.APIVersion, APIVersion)
	}
	if g.Kind != DocumentKind {
		return g.fieldError("kind", "%q, want %q", g.Kind, DocumentKind)
	}
	if !poolName.MatchString(g.Pool) {
		return g.fieldError("pool", "%q is not a pool name (lower-case letters, digits and '-', at most 63)", g.Pool)
	}
	if g.Sequence < 1 {
		return g.fieldError("sequence", "%d: sequences start at 1", g.Sequence)
	}
	if len(g.Pins) == 0 {
		return g.fieldError("pins", "no pins")
	}
	for _, k := range sortedKinds(g.Pins) {
		f := "pins." + string(k)
		if !k.Valid() {
			return g.fieldError(f, "unknown artifact kind %q (one of %s)", k, kindList())
		}
		if p := g.Pins[k].check(k); p != nil {
			return g.fieldError(f+p.sub, "%s", p.msg)
		}
	}
	for _, r := range []struct {
		field string
		r     Range
	}{
		{"compatibility.controlPlaneProtocol", g.Compatibility.ControlPlaneProtocol},
		{"compatibility.runnerProtocol", g.Compatibility.RunnerProtocol},
	} {
		switch {
		case r.r.Min < 1:
			return g.fieldError(r.field+".min", "%d: protocol versions start at 1", r.r.Min)
		case r.r.Max > MaxProtocol:
			return g.fieldError(r.field+".max", "%d is over the limit of %d", r.r.Max, MaxProtocol)
		case r.r.Min > r.r.Max:
			return g.fieldError(r.field, "min %d is above max %d", r.r.Min, r.r.Max)
		}
	}
	if g.Verification != nil {
		if err := g.validateVerification(); err != nil {
			return err
		}
	}
	if g.ID == "" && !requireID {
		return nil
	}
	if !idPattern.MatchString(g.ID) {
		if g.ID == "" {
			want, _ := ComputeID(g)
			return g.fieldError("id", "required: the id of this content is %s", want)
		}
		return g.fieldError("id", "%q is not g-<64 hex>", g.ID)
	}
	want, err := ComputeID(g)
	if err != nil {
		return g.fieldError("id", "%v", err)
	}
	if g.ID != want {
		return g.fieldError("id", "id %s does not match content %s: a generation is never edited; a change is a new generation", g.ID, want)
	}
	return nil
}

func (g *Generation) validateVerification() error {
	v := g.Verification
	if !policyName.MatchString(v.Policy.Name) {
		return g.fieldError("verification.policy.name", "%q is not a policy name", v.Policy.Name)
	}
	if !sha256Digest.MatchString(v.Policy.Digest) {
		return g.fieldError("verification.policy.digest", "%q is not sha256:<64 hex>", v.Policy.Digest)
	}
	if v.VerifiedAt.IsZero() {
		return g.fieldError("verification.verifiedAt", "required")
	}
	seen := map[Kind]bool{}
	for i, a := range v.Artifacts {
		f := fmt.Sprintf("verification.artifacts[%d]", i)
		if !a.Kind.Valid() {
			return g.fieldError(f+".kind", "unknown artifact kind %q (one of %s)", a.Kind, kindList())
		}
		if seen[a.Kind] {
			return g.fieldError(f+".kind", "%s is recorded twice", a.Kind)
		}
		seen[a.Kind] = true
		p, ok := g.Pins[a.Kind]
		if !ok {
			return g.fieldError(f+".kind", "%s is not pinned", a.Kind)
		}
		if p.Form() != FormImage {
			return g.fieldError(f+".kind", "%s is pinned by %s: only image pins are verified", a.Kind, p.Form())
		}
		if a.Digest != p.Identity() {
			return g.fieldError(f+".digest", "%q is not the digest of the %s pin (%s)", a.Digest, a.Kind, p.Identity())
		}
		for j, s := range a.Signatures {
			if msg := checkToken(s, maxID); msg != "" {
				return g.fieldError(fmt.Sprintf("%s.signatures[%d]", f, j), "%s", msg)
			}
		}
		for j, at := range a.Attestations {
			af := fmt.Sprintf("%s.attestations[%d]", f, j)
			if msg := checkToken(at.PredicateType, maxID); msg != "" {
				return g.fieldError(af+".predicateType", "%s", msg)
			}
			if !sha256Digest.MatchString(at.Digest) {
				return g.fieldError(af+".digest", "%q is not sha256:<64 hex>", at.Digest)
			}
		}
	}
	return nil
}

// Marshal writes g as YAML: fields and pins in a fixed order, the id
// computed from the content. An id already set must match the content
// (a changed generation is a new one: see New). g itself is not modified.
func Marshal(g *Generation) ([]byte, error) {
	c := *g
	c.doc, c.File = nil, ""
	if err := c.validate(false); err != nil {
		return nil, err
	}
	if c.ID == "" {
		id, err := ComputeID(&c)
		if err != nil {
			return nil, err
		}
		c.ID = id
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("generation: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("generation: marshal: %w", err)
	}
	return buf.Bytes(), nil
}
