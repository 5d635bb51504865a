package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/slipway-dev/slipway/internal/strictyaml"
	"github.com/slipway-dev/slipway/pkg/release/attest"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// Document identity.
const (
	APIVersion = "slipway.dev/v1alpha1"
	Kind       = "VerificationPolicy"
)

// MaxSize bounds a policy file.
const MaxSize = 1 << 20

// TlogNone is the only transparency-log mode reachable here: signatures and
// attestations are checked against the policy's keys alone, offline, with
// no log entry. A policy must say so in spec.transparencyLog.
const TlogNone = "none"

// ErrPolicy marks a policy that does not parse or validate; the message
// names file:line and the field.
var ErrPolicy = errors.New("invalid verification policy")

// Kinds are the artifact kinds a rule can match.
var Kinds = []string{
	"control-plane", "runner", "workspace-template", "node-image", "runtime-class",
	"policy", "model", "prompt-bundle", "secret-version",
}

// Attestation type shorthands and the predicate types they stand for.
var attestationTypes = map[string][]string{
	"slsaprovenance": {attest.PredicateSLSAProvenanceV1},
	"spdx":           {attest.PredicateSPDX},
	"cyclonedx":      {attest.PredicateCycloneDX},
	"sbom":           {attest.PredicateSPDX, attest.PredicateCycloneDX},
}

// Policy is a parsed VerificationPolicy document.
type Policy struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`

	// File is where the policy was read from ("" when parsed from bytes).
	File string `yaml:"-" json:"-"`
	// Digest is the sha256 of the policy's bytes ("sha256:<hex>"): which
	// revision of the policy a verification used.
	Digest string `yaml:"-" json:"-"`

	doc       *strictyaml.Doc
	verifiers map[string]signature.Verifier
	readKey   func(name string) ([]byte, error)
	// trust hashes the document and every key's PEM: what a cached
	// result depends on (a key file can change under the same document).
	trust string
}

// Metadata names the policy.
type Metadata struct {
	Name string `yaml:"name" json:"name"`
}

// Spec says who may sign what and which attestations are required.
type Spec struct {
	// TransparencyLog must be "none" (offline, key only): written out so
	// that working without a log is a visible choice.
	TransparencyLog string `yaml:"transparencyLog" json:"transparencyLog"`
	// AllowMutableReferences lets a tag be verified (by the digest it
	// resolves to at verification time). Default false: tags are refused.
	AllowMutableReferences bool `yaml:"allowMutableReferences,omitempty" json:"allowMutableReferences,omitempty"`
	// Keys are the public keys the rules refer to by name.
	Keys []Key `yaml:"keys" json:"keys"`
	// Rules say what an artifact must carry. Every rule that matches an
	// artifact applies; an artifact no rule matches is refused.
	Rules []Rule `yaml:"rules" json:"rules"`
}

// Key is a named cosign public key, inline or in a file.
type Key struct {
	Name string `yaml:"name" json:"name"`
	// PublicKey is a PEM public key.
	PublicKey string `yaml:"publicKey,omitempty" json:"publicKey,omitempty"`
	// PublicKeyFile is a PEM file, relative to the policy file.
	PublicKeyFile string `yaml:"publicKeyFile,omitempty" json:"publicKeyFile,omitempty"`
}

// Rule is what one class of artifacts must carry.
type Rule struct {
	Name  string `yaml:"name" json:"name"`
	Match Match  `yaml:"match" json:"match"`
	// Signatures, if set, requires a cosign signature by one of Keys.
	Signatures *Signatures `yaml:"signatures,omitempty" json:"signatures,omitempty"`
	// Attestations each require a verified attestation.
	Attestations []Attestation `yaml:"attestations,omitempty" json:"attestations,omitempty"`
	// AllowUnverified must be set, and is only allowed, on a rule that
	// requires nothing: a rule requiring nothing by accident is refused.
	AllowUnverified bool `yaml:"allowUnverified,omitempty" json:"allowUnverified,omitempty"`
}

// Match selects artifacts by kind and by repository ("registry/path"
// patterns in path.Match syntax). An empty list matches everything.
type Match struct {
	Kinds        []string `yaml:"kinds,omitempty" json:"kinds,omitempty"`
	Repositories []string `yaml:"repositories,omitempty" json:"repositories,omitempty"`
}

// Signatures names the keys one of which must have signed.
type Signatures struct {
	Keys []string `yaml:"keys" json:"keys"`
}

// Attestation is one required attestation.
type Attestation struct {
	// Name labels the requirement in results (default: the type).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Type is slsaprovenance, spdx, cyclonedx or sbom (SPDX or CycloneDX).
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// PredicateType is a predicate type URI, instead of Type.
	PredicateType string `yaml:"predicateType,omitempty" json:"predicateType,omitempty"`
	// Keys may have signed it (default: the rule's signature keys).
	Keys []string `yaml:"keys,omitempty" json:"keys,omitempty"`
	// BuilderID, for SLSA provenance, is the required runDetails.builder.id.
	BuilderID string `yaml:"builderID,omitempty" json:"builderID,omitempty"`
	// BuildType, for SLSA provenance, is the required buildDefinition.buildType.
	BuildType string `yaml:"buildType,omitempty" json:"buildType,omitempty"`
}

// label names the requirement in results.
func (a Attestation) label() string {
	switch {
	case a.Name != "":
		return a.Name
	case a.Type != "":
		return a.Type
	default:
		return a.PredicateType
	}
}

// predicateTypes lists the predicate types that satisfy the requirement.
func (a Attestation) predicateTypes() []string {
	if a.PredicateType != "" {
		return []string{a.PredicateType}
	}
	return attestationTypes[a.Type]
}

// Load reads and validates a policy file, loading its keys. Errors name
// file:line.
func Load(file string) (*Policy, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", file, ErrPolicy, fi.Size(), MaxSize)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return parse(b, file, nil)
}

// Parse decodes and validates a policy from bytes. Key files are resolved
// against the working directory.
func Parse(b []byte) (*Policy, error) { return parse(b, "", nil) }

// ParseFrom decodes and validates a policy that lives somewhere other than
// the local disk (a config repository): name labels errors, and readKey
// returns the content of a publicKeyFile (as written in the policy, relative
// to the policy's folder).
func ParseFrom(b []byte, name string, readKey func(file string) ([]byte, error)) (*Policy, error) {
	return parse(b, name, readKey)
}

func parse(b []byte, file string, readKey func(string) ([]byte, error)) (*Policy, error) {
	p := &Policy{File: file, readKey: readKey}
	doc, err := strictyaml.Decode(b, p)
	if err != nil {
		var e *strictyaml.Error
		if errors.As(err, &e) {
			return nil, fmt.Errorf("%s:%d: %w: %s", displayName(file), e.Line, ErrPolicy, e.Msg)
		}
		return nil, fmt.Errorf("%s: %w: %v", displayName(file), ErrPolicy, err)
	}
	p.doc = doc
	sum := sha256.Sum256(b)
	p.Digest = "sha256:" + hex.EncodeToString(sum[:])
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func displayName(file string) string {
	if file == "" {
		return "<policy>"
	}
	return file
}

// fieldError names file:line and the field path.
func (p *Policy) fieldError(field, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %w: %s", displayName(p.File), p.doc.Line(field), field, ErrPolicy, fmt.Sprintf(format, args...))
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

func (p *Policy) validate() error {
	if p.APIVersion != APIVersion {
		return p.fieldError("apiVersion", "%q, want %q", p.APIVersion, APIVersion)
	}
	if p.Kind != Kind {
		return p.fieldError("kind", "%q, want %q", p.Kind, Kind)
	}
	if !namePattern.MatchString(p.Metadata.Name) {
		return p.fieldError("metadata.name", "%q is not a name (lower-case letters, digits, '.', '_', '-')", p.Metadata.Name)
	}
	switch p.Spec.TransparencyLog {
	case TlogNone:
	case "":
		return p.fieldError("spec.transparencyLog", "required: say how transparency logs are used; the only mode here is %q (offline, keys only)", TlogNone)
	default:
		return p.fieldError("spec.transparencyLog", "%q is not supported here; the only mode is %q (offline, keys only)", p.Spec.TransparencyLog, TlogNone)
	}

	p.verifiers = map[string]signature.Verifier{}
	trust := sha256.New()
	trust.Write([]byte(p.Digest))
	defer func() { p.trust = "sha256:" + hex.EncodeToString(trust.Sum(nil)) }()
	for i, k := range p.Spec.Keys {
		f := fmt.Sprintf("spec.keys[%d]", i)
		if !namePattern.MatchString(k.Name) {
			return p.fieldError(f+".name", "%q is not a name", k.Name)
		}
		if _, dup := p.verifiers[k.Name]; dup {
			return p.fieldError(f+".name", "key %q is defined twice", k.Name)
		}
		v, pem, err := p.loadKey(f, k)
		if err != nil {
			return err
		}
		fmt.Fprintf(trust, "\x00%s\x00%d\x00", k.Name, len(pem))
		trust.Write(pem)
		p.verifiers[k.Name] = v
	}

	if len(p.Spec.Rules) == 0 {
		return p.fieldError("spec.rules", "no rules: a policy must say what artifacts must carry")
	}
	seen := map[string]bool{}
	for i, r := range p.Spec.Rules {
		if err := p.validateRule(fmt.Sprintf("spec.rules[%d]", i), r, seen); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policy) loadKey(f string, k Key) (signature.Verifier, []byte, error) {
	var pem []byte
	switch {
	case k.PublicKey != "" && k.PublicKeyFile != "":
		return nil, nil, p.fieldError(f, "key %q has both publicKey and publicKeyFile", k.Name)
	case k.PublicKey != "":
		pem = []byte(k.PublicKey)
		f += ".publicKey"
	case k.PublicKeyFile != "":
		var b []byte
		var err error
		if p.readKey != nil {
			b, err = p.readKey(k.PublicKeyFile)
		} else {
			file := k.PublicKeyFile
			if !filepath.IsAbs(file) && p.File != "" {
				file = filepath.Join(filepath.Dir(p.File), file)
			}
			b, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, nil, p.fieldError(f+".publicKeyFile", "%v", err)
		}
		pem = b
		f += ".publicKeyFile"
	default:
		return nil, nil, p.fieldError(f, "key %q has neither publicKey nor publicKeyFile", k.Name)
	}
	v, err := sign.LoadVerifier(pem)
	if err != nil {
		return nil, nil, p.fieldError(f, "key %q: %v", k.Name, err)
	}
	return v, pem, nil
}

func (p *Policy) validateRule(f string, r Rule, seen map[string]bool) error {
	if !namePattern.MatchString(r.Name) {
		return p.fieldError(f+".name", "%q is not a name", r.Name)
	}
	if seen[r.Name] {
		return p.fieldError(f+".name", "rule %q is defined twice", r.Name)
	}
	seen[r.Name] = true
	for j, k := range r.Match.Kinds {
		if !slices.Contains(Kinds, k) {
			return p.fieldError(fmt.Sprintf("%s.match.kinds[%d]", f, j), "unknown artifact kind %q (one of %s)", k, strings.Join(Kinds, ", "))
		}
	}
	for j, pat := range r.Match.Repositories {
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			return p.fieldError(fmt.Sprintf("%s.match.repositories[%d]", f, j), "bad pattern %q", pat)
		}
	}
	requires := r.Signatures != nil || len(r.Attestations) > 0
	switch {
	case !requires && !r.AllowUnverified:
		return p.fieldError(f, "rule %q requires nothing (no signatures, no attestations): unsafe; set allowUnverified: true if that is meant", r.Name)
	case requires && r.AllowUnverified:
		return p.fieldError(f+".allowUnverified", "rule %q requires signatures or attestations and also allows unverified artifacts", r.Name)
	}
	if r.Signatures != nil {
		if len(r.Signatures.Keys) == 0 {
			return p.fieldError(f+".signatures.keys", "no keys: which keys may sign?")
		}
		if err := p.knownKeys(f+".signatures.keys", r.Signatures.Keys); err != nil {
			return err
		}
	}
	for j, a := range r.Attestations {
		af := fmt.Sprintf("%s.attestations[%d]", f, j)
		switch {
		case a.Type != "" && a.PredicateType != "":
			return p.fieldError(af, "type and predicateType are exclusive")
		case a.Type == "" && a.PredicateType == "":
			return p.fieldError(af, "type (slsaprovenance, spdx, cyclonedx, sbom) or predicateType is required")
		case a.Type != "" && attestationTypes[a.Type] == nil:
			return p.fieldError(af+".type", "unknown attestation type %q (slsaprovenance, spdx, cyclonedx, sbom)", a.Type)
		}
		if (a.BuilderID != "" || a.BuildType != "") && !slices.Contains(a.predicateTypes(), attest.PredicateSLSAProvenanceV1) {
			return p.fieldError(af, "builderID and buildType apply to SLSA provenance only")
		}
		keys := a.Keys
		if len(keys) == 0 && r.Signatures != nil {
			keys = r.Signatures.Keys
		}
		if len(keys) == 0 {
			return p.fieldError(af+".keys", "no keys: which keys may sign this attestation?")
		}
		if err := p.knownKeys(af+".keys", keys); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policy) knownKeys(f string, names []string) error {
	for i, n := range names {
		if _, ok := p.verifiers[n]; !ok {
			return p.fieldError(fmt.Sprintf("%s[%d]", f, i), "unknown key %q (not in spec.keys)", n)
		}
	}
	return nil
}

// ReadFrom parses the policy at file through read (a config repository
// tree's ReadFile); key files are read relative to file's folder, and label
// names the policy in errors (file, or "file in REPO"). An error of read for
// file itself is returned as it is, so that a caller can tell a missing
// policy (fs.ErrNotExist) from a bad one.
func ReadFrom(read func(path string) ([]byte, error), file, label string) (*Policy, error) {
	b, err := read(file)
	if err != nil {
		return nil, err
	}
	return ParseFrom(b, label, func(f string) ([]byte, error) { return read(path.Join(path.Dir(file), f)) })
}
