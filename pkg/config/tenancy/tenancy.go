package tenancy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/slipway-dev/slipway/internal/strictyaml"
	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Document identity and where the documents live in the config repository.
const (
	APIVersion  = pool.APIVersion
	KindTenant  = "Tenant"
	KindProfile = "Profile"
	KindPricing = "Pricing"

	TenantsDir  = "tenants"
	ProfilesDir = "profiles"
	PricingFile = "pricing.yaml"

	maxDocumentLen = 1 << 20
)

// Errors. Each error of this package wraps one of these; a parse or
// validation error names the file and line at fault.
var (
	// ErrInvalid marks a document that does not parse or validate, or a
	// configuration whose documents do not fit together (a tenant naming a
	// profile that does not exist).
	ErrInvalid = errors.New("invalid document")
	// ErrNotFound marks a tenant, profile or revision that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrForbidden marks a tenant asking for a pool or profile it may not use.
	ErrForbidden = errors.New("forbidden")
)

// TenantFile and ProfileFile are where tenant and profile name are declared.
func TenantFile(name string) string  { return path.Join(TenantsDir, name+".yaml") }
func ProfileFile(name string) string { return path.Join(ProfilesDir, name+".yaml") }

// ValidName reports whether name can name a tenant, profile or price class
// (an RFC 1123 label, as pool names are).
func ValidName(name string) bool { return pool.ValidName(name) }

// Versioned is one parsed document with where it came from: its path in the
// config repository, the commit it was read at, and the digest of its bytes,
// so that a job can record exactly which policy it was admitted under and be
// interpreted with it later.
type Versioned[T any] struct {
	Value    T      `json:"value"`
	Path     string `json:"path"`
	Revision string `json:"revision"`
	// Digest is "sha256:<hex>" of Raw.
	Digest string `json:"digest"`
	// Raw is the file's bytes as committed.
	Raw []byte `json:"raw,omitempty"`
}

// Digest returns "sha256:<hex>" of b, the digest a Versioned carries.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func versioned[T any](v T, p, revision string, raw []byte) Versioned[T] {
	return Versioned[T]{Value: v, Path: p, Revision: revision, Digest: Digest(raw), Raw: append([]byte(nil), raw...)}
}

// decode decodes b strictly into v; p labels errors.
func decode(b []byte, p string, v any) (*strictyaml.Doc, error) {
	if len(b) > maxDocumentLen {
		return nil, fmt.Errorf("%s: %w: %d bytes, over the limit of %d", p, ErrInvalid, len(b), maxDocumentLen)
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil, fmt.Errorf("%s: %w: empty file", p, ErrInvalid)
	}
	doc, err := strictyaml.Decode(b, v)
	if err != nil {
		var e *strictyaml.Error
		if errors.As(err, &e) && e.Line > 0 {
			return nil, fmt.Errorf("%s:%d: %w: %s", p, e.Line, ErrInvalid, e.Msg)
		}
		return nil, fmt.Errorf("%s: %w: %v", p, ErrInvalid, err)
	}
	return doc, nil
}

// fieldError names file p, the line of field in doc, and the field.
func fieldError(p string, doc *strictyaml.Doc, field, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %w: %s", p, doc.Line(field), field, ErrInvalid, fmt.Sprintf(format, args...))
}

type fieldErr func(field, format string, args ...any) error

// header checks apiVersion and kind.
func header(fe fieldErr, apiVersion, kind, want string) error {
	if apiVersion != APIVersion {
		return fe("apiVersion", "want apiVersion %s, kind %s (got %s, %s)", APIVersion, want, orNone(apiVersion), orNone(kind))
	}
	if kind != want {
		return fe("kind", "want apiVersion %s, kind %s (got %s, %s)", APIVersion, want, orNone(apiVersion), orNone(kind))
	}
	return nil
}

// checkName checks that name is valid and equals the file's name.
func checkName(fe fieldErr, p, name, what string) error {
	if !ValidName(name) {
		return fe("name", "%q is not a %s name (lower-case letters, digits, '-')", name, what)
	}
	if base := strings.TrimSuffix(path.Base(p), ".yaml"); base != name {
		return fe("name", "%q differs from the file's name %q", name, base)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// names checks a list of names: each valid by ok (nil: any non-empty word
// without spaces) and none twice.
func names(fe fieldErr, field string, list []string, ok func(string) bool, what string) error {
	seen := map[string]bool{}
	for i, n := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case ok != nil && !ok(n):
			return fe(f, "%q is not a %s name", n, what)
		case ok == nil && (n == "" || strings.ContainsAny(n, " \t\r\n")):
			return fe(f, "%q is not a %s name", n, what)
		case seen[n]:
			return fe(f, "%q listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

// whole is an integer field that refuses 2.5 (which the YAML decoder would
// silently truncate to 2) and anything else but a whole number.
type whole int64

// UnmarshalYAML reads a whole number.
func (w *whole) UnmarshalYAML(n *yaml.Node) error {
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return fmt.Errorf("line %d: %q is not a whole number", n.Line, n.Value)
	}
	*w = whole(v)
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Tenant is tenants/<name>.yaml: who may submit jobs, on which pools, with
// which capability profiles, how many at once and how many waiting, and
// what they may spend.
type Tenant struct {
	Name string `json:"name"`
	// Pools and Profiles are the pools and capability profiles the tenant
	// may use.
	Pools    []string `json:"pools"`
	Profiles []string `json:"profiles"`
	// Concurrency is the most jobs of the tenant running at once (1 or more).
	Concurrency int `json:"concurrency"`
	// QueueBound is the most jobs of the tenant waiting (1 or more).
	QueueBound int `json:"queueBound"`
	// Budget is what the tenant may spend per period; nil: unlimited.
	Budget *Budget `json:"budget,omitempty"`
	// Destinations receive the tenant's job events (destination.go).
	Destinations []Destination `json:"destinations,omitempty"`
	// Tier groups tenants for the control plane's admission metrics
	// (queue depth, arrival rate, admission wait): a short lower-case word,
	// DefaultTier when the file leaves it out. Tiers are a metric label, so
	// keep them few (free, standard, enterprise), never one per tenant.
	Tier string `json:"tier"`
}

// DefaultTier is a tenant's tier when its file names none.
const DefaultTier = "standard"

var tierRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,23}$`)

// Budget is an amount, in the price table's currency, per period.
type Budget struct {
	Amount float64 `json:"amount"`
	// Period is day, week (ISO: from Monday) or month, in UTC.
	Period string `json:"period"`
}

// Budget periods.
const (
	Day   = "day"
	Week  = "week"
	Month = "month"
)

// PeriodStart returns the start of the budget period holding now: midnight
// UTC of the day, of the ISO week's Monday, or of the month's first day.
// It is the zero time for an unknown period.
func (b Budget) PeriodStart(now time.Time) time.Time {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch b.Period {
	case Day:
		return day
	case Week:
		back := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -back)
	case Month:
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// PeriodEnd returns when the budget period holding now ends (the next
// period's start): when a refused job may fit again. It is the zero time
// for an unknown period.
func (b Budget) PeriodEnd(now time.Time) time.Time {
	start := b.PeriodStart(now)
	switch b.Period {
	case Day:
		return start.AddDate(0, 0, 1)
	case Week:
		return start.AddDate(0, 0, 7)
	case Month:
		return start.AddDate(0, 1, 0)
	}
	return time.Time{}
}

type tenantDoc struct {
	APIVersion  string     `yaml:"apiVersion"`
	Kind        string     `yaml:"kind"`
	Name        string     `yaml:"name"`
	Pools       []string   `yaml:"pools"`
	Profiles    []string   `yaml:"profiles"`
	Concurrency whole      `yaml:"concurrency"`
	QueueBound  whole      `yaml:"queueBound"`
	Tier        string     `yaml:"tier,omitempty"`
	Budget      *budgetDoc `yaml:"budget,omitempty"`
	// Destinations: see destination.go.
	Destinations []destinationDoc `yaml:"destinations,omitempty"`
}

type budgetDoc struct {
	Amount *float64 `yaml:"amount"`
	Period string   `yaml:"period"`
}

// ParseTenant decodes and validates tenants/<name>.yaml; path is the file's
// path in the config repository (its name must equal the tenant's) and
// labels errors.
func ParseTenant(path string, b []byte) (*Tenant, error) {
	var d tenantDoc
	doc, err := decode(b, path, &d)
	if err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error { return fieldError(path, doc, field, format, args...) }
	if err := header(fe, d.APIVersion, d.Kind, KindTenant); err != nil {
		return nil, err
	}
	if err := checkName(fe, path, d.Name, "tenant"); err != nil {
		return nil, err
	}
	switch {
	case len(d.Pools) == 0:
		return nil, fe("pools", "required: which pools may the tenant use?")
	case len(d.Profiles) == 0:
		return nil, fe("profiles", "required: which capability profiles may the tenant use?")
	}
	if err := names(fe, "pools", d.Pools, pool.ValidName, "pool"); err != nil {
		return nil, err
	}
	if err := names(fe, "profiles", d.Profiles, ValidName, "profile"); err != nil {
		return nil, err
	}
	switch {
	case d.Concurrency < 1:
		return nil, fe("concurrency", "%d: want 1 or more running jobs", d.Concurrency)
	case d.QueueBound < 1:
		return nil, fe("queueBound", "%d: want 1 or more queued jobs", d.QueueBound)
	}
	t := &Tenant{Name: d.Name, Pools: d.Pools, Profiles: d.Profiles, Concurrency: int(d.Concurrency), QueueBound: int(d.QueueBound), Tier: DefaultTier}
	if d.Tier != "" {
		if !tierRE.MatchString(d.Tier) {
			return nil, fe("tier", "%q: want a short lower-case word (a-z 0-9 -, 24 at most), e.g. free, standard or enterprise", d.Tier)
		}
		t.Tier = d.Tier
	}
	if bd := d.Budget; bd != nil {
		switch {
		case bd.Amount == nil:
			return nil, fe("budget.amount", "required (leave budget out for no limit)")
		case !finite(*bd.Amount) || *bd.Amount < 0:
			return nil, fe("budget.amount", "%v: want a number, 0 or more", *bd.Amount)
		case bd.Period != Day && bd.Period != Week && bd.Period != Month:
			return nil, fe("budget.period", "%q: want day, week or month", bd.Period)
		}
		t.Budget = &Budget{Amount: *bd.Amount, Period: bd.Period}
	}
	if t.Destinations, err = parseDestinations(fe, d.Destinations); err != nil {
		return nil, err
	}
	return t, nil
}

// Pricing is pricing.yaml: the price of compute and storage per pool class
// and state.
type Pricing struct {
	// Currency names the unit prices and budgets are in (credits).
	Currency string `json:"currency"`
	// Classes maps a price class to its rates.
	Classes map[string]Rates `json:"classes"`
	// Pools maps a pool to its class. A pool not listed has an unknown
	// price, never a zero one.
	Pools map[string]string `json:"pools"`
}

// Rates are the prices of a pool class per state of its sandboxes. Active
// is required (budgets and a job's worst case rest on it); a price left
// out of pricing.yaml is nil here: that term's cost is unknown, never zero.
type Rates struct {
	// Warm is per hour of a warm member ready and unclaimed (warm idle).
	Warm *float64 `json:"warm,omitempty"`
	// Active is per hour of a sandbox held by a claim (running a job).
	Active float64 `json:"active"`
	// Retained is per hour of a sandbox stopped but kept (suspended).
	Retained *float64 `json:"retained,omitempty"`
	// Storage is per GiB-hour of bytes kept on disk (workspaces,
	// checkpoints).
	Storage *float64 `json:"storage,omitempty"`
}

// Rate returns the rates of pool's class; false when the pool's price is
// unknown (not listed, or no price table).
func (p *Pricing) Rate(pool string) (Rates, bool) {
	if p == nil {
		return Rates{}, false
	}
	class, ok := p.Pools[pool]
	if !ok {
		return Rates{}, false
	}
	r, ok := p.Classes[class]
	return r, ok
}

// WorstCase is what a job running for d at rates r can cost at most: the
// active rate times d in hours.
func WorstCase(r Rates, d time.Duration) float64 {
	return r.Active * d.Hours()
}

type pricingDoc struct {
	APIVersion string              `yaml:"apiVersion"`
	Kind       string              `yaml:"kind"`
	Currency   string              `yaml:"currency"`
	Classes    map[string]ratesDoc `yaml:"classes"`
	Pools      map[string]string   `yaml:"pools"`
}

type ratesDoc struct {
	Warm     *float64 `yaml:"warm"`
	Active   *float64 `yaml:"active"`
	Retained *float64 `yaml:"retained"`
	Storage  *float64 `yaml:"storage"`
}

// ParsePricing decodes and validates pricing.yaml; path labels errors.
func ParsePricing(path string, b []byte) (*Pricing, error) {
	var d pricingDoc
	doc, err := decode(b, path, &d)
	if err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error { return fieldError(path, doc, field, format, args...) }
	if err := header(fe, d.APIVersion, d.Kind, KindPricing); err != nil {
		return nil, err
	}
	if !currencyOK(d.Currency) {
		return nil, fe("currency", "%q: want a unit name (letters, digits, '-', '_'; like credits)", d.Currency)
	}
	if len(d.Classes) == 0 {
		return nil, fe("classes", "required: at least one price class")
	}
	p := &Pricing{Currency: d.Currency, Classes: map[string]Rates{}, Pools: map[string]string{}}
	for _, class := range sortedKeys(d.Classes) {
		f := "classes." + class
		if !ValidName(class) {
			return nil, fe(f, "%q is not a class name (lower-case letters, digits, '-')", class)
		}
		rd := d.Classes[class]
		switch {
		case rd.Active == nil:
			return nil, fe(f, "active: required (a rate per hour, 0 or more)")
		case !finite(*rd.Active) || *rd.Active < 0:
			return nil, fe(f+".active", "%v: want a rate per hour, 0 or more", *rd.Active)
		}
		r := Rates{Active: *rd.Active}
		for _, x := range []struct {
			name, unit string
			v          *float64
			to         **float64
		}{{"warm", "per hour", rd.Warm, &r.Warm}, {"retained", "per hour", rd.Retained, &r.Retained}, {"storage", "per GiB-hour", rd.Storage, &r.Storage}} {
			if x.v == nil {
				continue // unknown, not zero
			}
			if !finite(*x.v) || *x.v < 0 {
				return nil, fe(f+"."+x.name, "%v: want a rate %s, 0 or more", *x.v, x.unit)
			}
			v := *x.v
			*x.to = &v
		}
		p.Classes[class] = r
	}
	for _, pl := range sortedKeys(d.Pools) {
		f := "pools." + pl
		if !pool.ValidName(pl) {
			return nil, fe("pools", "%q is not a pool name", pl)
		}
		class := d.Pools[pl]
		if _, ok := p.Classes[class]; !ok {
			return nil, fe(f, "class %q is not in classes (%s)", class, strings.Join(sortedKeys(p.Classes), ", "))
		}
		p.Pools[pl] = class
	}
	return p, nil
}

func currencyOK(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-' || c == '_')) {
			return false
		}
	}
	return true
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
