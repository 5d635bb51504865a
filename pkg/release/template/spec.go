package template

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/strictyaml"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Spec document identity.
const (
	APIVersion = "slipway.dev/v1alpha1"
	Kind       = "WorkspaceTemplate"
)

// MaxSpecSize bounds a template.yaml.
const MaxSpecSize = 1 << 20

// ErrSpec is the family of errors for template specs that do not parse or validate.
var ErrSpec = errors.New("invalid template spec")

// Template is a parsed templates/<name>/template.yaml.
type Template struct {
	APIVersion string   `yaml:"apiVersion" json:"apiVersion"`
	Kind       string   `yaml:"kind" json:"kind"`
	Metadata   Metadata `yaml:"metadata" json:"metadata"`
	Spec       Spec     `yaml:"spec" json:"spec"`

	// File is where the spec was read from; Dir the folder copy sources are relative to.
	File string `yaml:"-" json:"-"`
	Dir  string `yaml:"-" json:"-"`
	// Digest is the sha256 of the spec file's bytes ("sha256:<hex>").
	Digest string `yaml:"-" json:"-"`
	doc    *strictyaml.Doc
}

// Metadata names the template.
type Metadata struct {
	Name   string            `yaml:"name" json:"name"`
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Spec is what a workspace is built from and how it is checked.
type Spec struct {
	// Base is the image the template starts from, by digest (repo@sha256:…).
	// A tag is refused unless the build resolves it (--resolve-base), which records the pin.
	Base string `yaml:"base" json:"base"`
	// Env is the image's environment, for build steps, tests and the sandbox.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Workdir is the working directory of steps, tests and the sandbox (created if absent).
	Workdir string `yaml:"workdir,omitempty" json:"workdir,omitempty"`
	// User is "uid:gid" the sandbox runs as; build steps run as root.
	User string `yaml:"user,omitempty" json:"user,omitempty"`
	// Steps run in order in an isolated build sandbox on the rootfs.
	Steps []Step `yaml:"steps,omitempty" json:"steps,omitempty"`
	// Caches are seeded directories that are allowed to ship; scrubbing never removes them.
	Caches []Cache `yaml:"caches,omitempty" json:"caches,omitempty"`
	// Scrub adds paths (globs allowed) to the built-in scrub list.
	Scrub []string `yaml:"scrub,omitempty" json:"scrub,omitempty"`
	// Refresh names per-clone values regenerated at sandbox start; they must be absent
	// or empty in the frozen image: machine-id, ssh-host-keys, random-seed.
	Refresh []string `yaml:"refresh,omitempty" json:"refresh,omitempty"`
	// Tests run in order in one sandbox of the frozen tree shaped as every sandbox of the
	// image (package isolate/shape: refreshed files, read-only root, private workspace);
	// all must pass before publishing.
	Tests []templatemeta.Test `yaml:"tests,omitempty" json:"tests,omitempty"`
	// Allow exempts scan findings by rule and path glob; every use is recorded in the result.
	Allow []Allow `yaml:"allow,omitempty" json:"allow,omitempty"`
	// SourceDateEpoch clamps every timestamp in the frozen image (seconds since 1970);
	// when absent the caller's SOURCE_DATE_EPOCH, else 0.
	SourceDateEpoch *int64 `yaml:"sourceDateEpoch,omitempty" json:"sourceDateEpoch,omitempty"`
	// Limits bound the build.
	Limits Limits `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// Step is one build step: exactly one of Copy or Run.
type Step struct {
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Copy copies a file or folder from the spec's folder (never outside it) into the rootfs.
	Copy *Copy `yaml:"copy,omitempty" json:"copy,omitempty"`
	// Run is an argv run with the rootfs as /.
	Run []string `yaml:"run,omitempty" json:"run,omitempty"`
	// Network allows the step network access (default false: only for package installs).
	Network bool `yaml:"network,omitempty" json:"network,omitempty"`
	// Env adds to the spec's env for this step only.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Timeout bounds the step (default Limits.StepTimeout).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Copy is a copy step. Src is relative to the spec's folder; a trailing slash copies
// a folder's contents. Dst is absolute in the rootfs.
type Copy struct {
	Src string `yaml:"src" json:"src"`
	Dst string `yaml:"dst" json:"dst"`
}

// Cache is a seeded cache directory allowed to ship.
type Cache struct {
	Path string `yaml:"path" json:"path"`
}

// Allow exempts scan findings of Rule under paths matching Path (a glob).
type Allow struct {
	Rule string `yaml:"rule" json:"rule"`
	Path string `yaml:"path" json:"path"`
}

// Limits bound a build.
type Limits struct {
	// StepTimeout bounds each step and test (default 10m).
	StepTimeout Duration `yaml:"stepTimeout,omitempty" json:"stepTimeout,omitempty"`
	// MaxOutput is how many bytes of a step's output are kept (default 1 MiB; the tail).
	MaxOutput int `yaml:"maxOutput,omitempty" json:"maxOutput,omitempty"`
	// MaxSize bounds the bytes the build adds over the base (default 4 GiB).
	MaxSize int64 `yaml:"maxSize,omitempty" json:"maxSize,omitempty"`
}

// Refresh kinds.
const (
	RefreshMachineID   = shape.RefreshMachineID
	RefreshSSHHostKeys = shape.RefreshSSHHostKeys
	RefreshRandomSeed  = shape.RefreshRandomSeed
)

// Defaults.
const (
	DefaultStepTimeout = 10 * time.Minute
	DefaultMaxOutput   = 1 << 20
	DefaultMaxSize     = 4 << 30
)

// Duration is a time.Duration written as "90s" or "10m" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 90s or 10m", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration as a string (JSON).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the duration MarshalText writes (the tests label
// of a template image is JSON).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration like 90s or 10m", b)
	}
	d.Duration = v
	return nil
}

// IsZero reports an unset duration (omitempty).
func (d Duration) IsZero() bool { return d.Duration == 0 }

// Load reads and validates a template spec. Errors name the file and line.
func Load(file string) (*Template, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", file, err)
	}
	if fi.Size() > MaxSpecSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrSpec, file, fi.Size(), MaxSpecSize)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", file, err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", file, err)
	}
	t.File = file
	t.Dir = dirOf(file)
	return t, nil
}

func dirOf(file string) string {
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		return file[:i+1]
	}
	return "./"
}

// Parse decodes and validates a spec strictly: unknown fields, a second
// document, wrong apiVersion or kind, and invalid values are refused. The
// error starts with the line: "12: spec.steps[1]: …".
func Parse(b []byte) (*Template, error) {
	var t Template
	doc, err := strictyaml.Decode(b, &t)
	if err != nil {
		return nil, specErr(err)
	}
	t.doc = doc
	sum := sha256.Sum256(b)
	t.Digest = "sha256:" + hex.EncodeToString(sum[:])
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// specErr turns a strictyaml error into "3: invalid template spec: …".
func specErr(err error) error {
	var e *strictyaml.Error
	if errors.As(err, &e) && e.Line > 0 {
		return fmt.Errorf("%d: %w: %s", e.Line, ErrSpec, e.Msg)
	}
	return fmt.Errorf(" %w: %v", ErrSpec, err)
}

var (
	namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
	userPattern = regexp.MustCompile(`^[0-9]{1,10}(:[0-9]{1,10})?$`)
	envPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// fieldError names the line of the field at path ("spec.steps[1].run").
func (t *Template) fieldError(p string, format string, args ...any) error {
	if t.File != "" {
		return fmt.Errorf("%s:%d: %s: %w: %s", t.File, t.line(p), p, ErrSpec, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%d: %s: %w: %s", t.line(p), p, ErrSpec, fmt.Sprintf(format, args...))
}

// line finds the line of the field at a dotted path ("spec.steps[1].run").
func (t *Template) line(p string) int { return t.doc.Line(p) }

func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }
