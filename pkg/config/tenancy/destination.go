package tenancy

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

// EventKinds are the event kinds a destination may select: the control
// plane's event set v1 (package control checks that the lists agree).
var EventKinds = []string{"state", "stdout", "stderr", "status", "tool_call", "file", "diff", "result", "product"}

// Destination defaults.
const (
	DefaultRatePerSecond = 10
	DefaultMaxAttempts   = 8
	maxAttemptsLimit     = 100
)

// Destination is a product a tenant's job events are delivered to: a
// webhook URL, signed with an HMAC secret held on the control plane's host
// (by reference: a file or an environment variable; never in the config
// repository, a job, an event or a log), and the event kinds it receives.
// Only the tenant's file names destinations: nothing a run outputs can
// choose or change one.
type Destination struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Kinds are the event kinds delivered; the others are skipped.
	Kinds []string `json:"kinds"`
	// RequiresResult: a job's result is published (validated delivery)
	// only once this destination's receipt of the result event came back.
	// It needs "result" in Kinds.
	RequiresResult bool      `json:"requiresResult,omitempty"`
	SecretRef      SecretRef `json:"secretRef"`
	// RatePerSecond bounds the attempts to this destination (default 10).
	RatePerSecond float64 `json:"ratePerSecond"`
	// MaxAttempts is each message's retry budget (default 8, at most 100).
	MaxAttempts int `json:"maxAttempts"`
}

// Wants says the destination receives events of kind.
func (d Destination) Wants(kind string) bool { return slices.Contains(d.Kinds, kind) }

// SecretRef names where the control plane reads a destination's signing
// secret: exactly one of a file on its host or an environment variable.
type SecretRef struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

func (r SecretRef) String() string {
	if r.File != "" {
		return "file " + r.File
	}
	return "environment variable " + r.Env
}

// Read reads the secret on this host. Errors name the reference, never
// the value; an empty secret is an error.
func (r SecretRef) Read() ([]byte, error) {
	var b []byte
	switch {
	case r.File != "":
		var err error
		if b, err = os.ReadFile(r.File); err != nil {
			return nil, fmt.Errorf("destination secret (%s): %w", r, err)
		}
	case r.Env != "":
		b = []byte(os.Getenv(r.Env))
	default:
		return nil, fmt.Errorf("destination secret: %w: no reference", ErrInvalid)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, fmt.Errorf("destination secret (%s) is empty", r)
	}
	return b, nil
}

type destinationDoc struct {
	Name           string        `yaml:"name"`
	URL            string        `yaml:"url"`
	Kinds          []string      `yaml:"kinds"`
	RequiresResult bool          `yaml:"requiresResult,omitempty"`
	SecretRef      *secretRefDoc `yaml:"secretRef"`
	RatePerSecond  *float64      `yaml:"ratePerSecond,omitempty"`
	MaxAttempts    *whole        `yaml:"maxAttempts,omitempty"`
}

type secretRefDoc struct {
	File string `yaml:"file,omitempty"`
	Env  string `yaml:"env,omitempty"`
}

func validEnvName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// parseDestinations validates a tenant's destinations.
func parseDestinations(fe fieldErr, list []destinationDoc) ([]Destination, error) {
	var out []Destination
	seen := map[string]bool{}
	for i, d := range list {
		f := func(field string) string { return fmt.Sprintf("destinations[%d].%s", i, field) }
		switch {
		case !ValidName(d.Name):
			return nil, fe(f("name"), "%q is not a destination name (lower-case letters, digits, '-')", d.Name)
		case seen[d.Name]:
			return nil, fe(f("name"), "%q listed twice", d.Name)
		}
		seen[d.Name] = true
		u, err := url.Parse(d.URL)
		switch {
		case d.URL == "":
			return nil, fe(f("url"), "required: the webhook URL")
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			return nil, fe(f("url"), "want an http(s)://host/path URL")
		case u.User != nil:
			return nil, fe(f("url"), "credentials in the URL: name the secret with secretRef instead")
		case u.Fragment != "":
			return nil, fe(f("url"), "a URL with a #fragment")
		}
		if len(d.Kinds) == 0 {
			return nil, fe(f("kinds"), "required: which event kinds (%s)?", strings.Join(EventKinds, ", "))
		}
		if err := names(fe, f("kinds"), d.Kinds, func(k string) bool { return slices.Contains(EventKinds, k) }, "event kind ("+strings.Join(EventKinds, ", ")+")"); err != nil {
			return nil, err
		}
		if d.RequiresResult && !slices.Contains(d.Kinds, "result") {
			return nil, fe(f("requiresResult"), "true, but kinds lacks result: the result could never be delivered")
		}
		r := d.SecretRef
		switch {
		case r == nil || (r.File == "" && r.Env == ""):
			return nil, fe(f("secretRef"), "required: {file: PATH} or {env: NAME} on the control plane's host")
		case r.File != "" && r.Env != "":
			return nil, fe(f("secretRef"), "either file or env, not both")
		case r.File != "" && !strings.HasPrefix(r.File, "/"):
			return nil, fe(f("secretRef.file"), "%q: want an absolute path on the control plane's host", r.File)
		case r.Env != "" && !validEnvName(r.Env):
			return nil, fe(f("secretRef.env"), "%q is not an environment variable name", r.Env)
		}
		dst := Destination{Name: d.Name, URL: d.URL, Kinds: d.Kinds, RequiresResult: d.RequiresResult,
			SecretRef: SecretRef{File: r.File, Env: r.Env}, RatePerSecond: DefaultRatePerSecond, MaxAttempts: DefaultMaxAttempts}
		if d.RatePerSecond != nil {
			if v := *d.RatePerSecond; !finite(v) || v <= 0 || v > 10000 {
				return nil, fe(f("ratePerSecond"), "%v: want a rate above 0, at most 10000", v)
			}
			dst.RatePerSecond = *d.RatePerSecond
		}
		if d.MaxAttempts != nil {
			if v := *d.MaxAttempts; v < 1 || v > maxAttemptsLimit {
				return nil, fe(f("maxAttempts"), "%d: want 1 to %d", v, maxAttemptsLimit)
			}
			dst.MaxAttempts = int(*d.MaxAttempts)
		}
		out = append(out, dst)
	}
	return out, nil
}
