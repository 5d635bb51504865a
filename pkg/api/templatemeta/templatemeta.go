package templatemeta

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Image labels every workspace template carries (pkg/release/template
// writes them when it builds one).
const (
	// LabelName is the template's metadata.name.
	LabelName = "dev.slipway.template.name"
	// LabelSpecDigest is the sha256 of the template spec it was built from.
	LabelSpecDigest = "dev.slipway.template.spec-digest"
	// LabelBaseDigest is the digest of the base image it was built on.
	LabelBaseDigest = "dev.slipway.template.base-digest"
	// LabelRefresh lists the per-sandbox refresh kinds, comma-separated
	// (machine-id, ssh-host-keys, random-seed).
	LabelRefresh = "dev.slipway.template.refresh"
	// LabelTests holds the template's tests as JSON (a list of Test), run
	// again in a sandbox by a rollout's template-tests proof.
	LabelTests = "dev.slipway.template.tests"
	// LabelUser is the user the workload runs as, when the spec names one.
	LabelUser = "dev.slipway.template.user"
)

// ErrInvalid marks a tests label that does not parse.
var ErrInvalid = errors.New("templatemeta: invalid tests label")

// Test is one of a template's smoke or security tests: an argv run in the
// template's tree (shaped as every sandbox is), which must exit 0 within
// Timeout (0: the runner's default).
type Test struct {
	Name    string   `yaml:"name" json:"name"`
	Run     []string `yaml:"run" json:"run"`
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Duration is a time.Duration written as "90s" or "10m", in the tests
// label's JSON and in a template spec's YAML.
type Duration struct{ time.Duration }

// MarshalText writes the duration as a string ("1m30s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration string; a negative one is refused.
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

// ParseTests reads the value of LabelTests: a JSON list of Test. An empty
// label has no tests (nil, nil). Errors wrap ErrInvalid.
func ParseTests(label string) ([]Test, error) {
	if label == "" {
		return nil, nil
	}
	var tests []Test
	if err := json.Unmarshal([]byte(label), &tests); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return tests, nil
}
