package tenancy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

func testdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseGood(t *testing.T) {
	tn, err := tenancy.ParseTenant("tenants/acme.yaml", []byte(testdata(t, "tenant.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	want := &tenancy.Tenant{Name: "acme", Pools: []string{"agents"}, Profiles: []string{"standard", "short"},
		Concurrency: 2, QueueBound: 20, Budget: &tenancy.Budget{Amount: 5, Period: "day"}, Tier: tenancy.DefaultTier}
	if !reflect.DeepEqual(tn, want) {
		t.Errorf("tenant = %+v, want %+v", tn, want)
	}
	p, err := tenancy.ParseProfile("profiles/standard.yaml", []byte(testdata(t, "profile.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxDuration != 2*time.Minute || p.MaxCommandDuration != time.Minute || p.MaxOutputBytes != 65536 ||
		p.MaxOutputLines != 2000 || p.Network.Mode != "allow-list" || len(p.Network.Allow) != 4 ||
		!reflect.DeepEqual(p.Secrets, []string{"github-token-v3"}) || !p.AllowsPool("agents") || p.AllowsPool("other") ||
		!p.AllowsTemplate("anything") {
		t.Errorf("profile = %+v", p)
	}
	pr, err := tenancy.ParsePricing("pricing.yaml", []byte(testdata(t, "pricing.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := pr.Rate("agents")
	if !ok || !reflect.DeepEqual(r, tenancy.Rates{Warm: ptr(0.1), Active: 1, Storage: ptr(0.01)}) {
		t.Errorf("Rate(agents) = %+v, %v", r, ok)
	}
	if r, ok := pr.Rate("unpriced"); ok {
		t.Errorf("Rate(unpriced) = %+v, true; want unknown", r)
	}
	var none *tenancy.Pricing
	if _, ok := none.Rate("agents"); ok {
		t.Error("a nil price table knows a price")
	}
	if got := tenancy.WorstCase(r, 90*time.Minute); got != 1.5 {
		t.Errorf("WorstCase = %v, want 1.5", got)
	}
	// An unlimited tenant, a profile with no per-command bound and a deny network.
	un := strings.Replace(testdata(t, "tenant.yaml"), "budget:\n  amount: 5\n  period: day\n", "", 1)
	if tn, err := tenancy.ParseTenant("tenants/acme.yaml", []byte(un)); err != nil || tn.Budget != nil {
		t.Errorf("unlimited tenant: %+v, %v", tn, err)
	}
	deny := "apiVersion: slipway.dev/v1alpha1\nkind: Profile\nname: short\nnetwork: {mode: deny}\nmaxDuration: 5s\noutput: {maxBytes: 1, maxLines: 1}\n"
	if p, err := tenancy.ParseProfile("profiles/short.yaml", []byte(deny)); err != nil || p.MaxCommandDuration != 0 || !p.AllowsPool("any") {
		t.Errorf("deny profile: %+v, %v", p, err)
	}
}

// refusal is one bad input: the good document with from replaced by to,
// refused at line with a message holding msg.
type refusal struct {
	from, to string
	line     int
	msg      string
}

func checkRefusals(t *testing.T, good, path string, parse func(string, []byte) error, cases map[string]refusal) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := strings.Replace(good, tc.from, tc.to, 1)
			if in == good {
				t.Fatalf("%q not in\n%s", tc.from, good)
			}
			err := parse(path, []byte(in))
			if !errors.Is(err, tenancy.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			prefix := fmt.Sprintf("%s:%d: ", path, tc.line)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant prefix %q and %q", err, prefix, tc.msg)
			}
		})
	}
}

func TestTenantRefusals(t *testing.T) {
	parse := func(p string, b []byte) error { _, err := tenancy.ParseTenant(p, b); return err }
	checkRefusals(t, testdata(t, "tenant.yaml"), "tenants/acme.yaml", parse, map[string]refusal{
		"unknown field":          {"queueBound: 20", "queueBound: 20\nqueuebound: 3", 8, "unknown field \"queuebound\""},
		"unknown budget field":   {"period: day", "period: day\n  currency: eur", 11, "unknown field \"currency\""},
		"wrong kind":             {"kind: Tenant", "kind: Profile", 2, "want apiVersion slipway.dev/v1alpha1, kind Tenant"},
		"wrong apiVersion":       {"v1alpha1", "v1", 1, "kind Tenant"},
		"name is not the file":   {"name: acme", "name: globex", 3, `"globex" differs from the file's name "acme"`},
		"bad name":               {"name: acme", "name: Acme", 3, "not a tenant name"},
		"negative concurrency":   {"concurrency: 2", "concurrency: -1", 6, "-1: want 1 or more"},
		"fractional concurrency": {"concurrency: 2", "concurrency: 2.5", 6, `"2.5" is not a whole number`},
		"concurrency a word":     {"concurrency: 2", "concurrency: two", 6, `"two" is not a whole number`},
		"huge queue bound":       {"queueBound: 20", "queueBound: 99999999999999999999", 7, "not a whole number"},
		"no concurrency":         {"concurrency: 2\n", "", 1, "concurrency"},
		"zero queue bound":       {"queueBound: 20", "queueBound: 0", 7, "0: want 1 or more"},
		"negative queue bound":   {"queueBound: 20", "queueBound: -20", 7, "-20: want 1 or more"},
		"tier a tenant id":       {"queueBound: 20", "queueBound: 20\ntier: Acme/Gold", 8, `tier: invalid document: "Acme/Gold": want a short lower-case word`},
		"negative budget":        {"amount: 5", "amount: -5", 9, "-5: want a number, 0 or more"},
		"not a number budget":    {"amount: 5", "amount: .nan", 9, "want a number"},
		"budget without amount":  {"  amount: 5\n", "", 9, "budget.amount: invalid document: required"},
		"period unknown":         {"period: day", "period: fortnight", 10, `"fortnight": want day, week or month`},
		"duplicate profile":      {"[standard, short]", "[standard, standard]", 5, `profiles[1]: invalid document: "standard" listed twice`},
		"duplicate pool":         {"[agents]", "[agents, b, agents]", 4, `pools[2]: invalid document: "agents" listed twice`},
		"bad pool name":          {"[agents]", "[Agents]", 4, `"Agents" is not a pool name`},
		"no profiles":            {"[standard, short]", "[]", 5, "required"},
		"no pools":               {"pools: [agents]\n", "", 1, "pools: invalid document: required"},
		"second document":        {"period: day\n", "period: day\n---\nkind: Tenant\n", 11, "one document per file"},
		"not a mapping":          {"pools: [agents]", "pools: {a: b}", 4, "got a "},
	})
	if _, err := tenancy.ParseTenant("tenants/acme.yaml", []byte("\n  \n")); !errors.Is(err, tenancy.ErrInvalid) || !strings.HasPrefix(err.Error(), "tenants/acme.yaml: ") {
		t.Errorf("empty file: %v", err)
	}
}

func TestProfileRefusals(t *testing.T) {
	parse := func(p string, b []byte) error { _, err := tenancy.ParseProfile(p, b); return err }
	checkRefusals(t, testdata(t, "profile.yaml"), "profiles/standard.yaml", parse, map[string]refusal{
		"unknown field":          {"maxLines: 2000", "maxLines: 2000\n  maxLine: 1", 16, "unknown field \"maxLine\""},
		"unknown top field":      {"templates: []", "templates: []\nimage: x", 19, "unknown field \"image\""},
		"wrong kind":             {"kind: Profile", "kind: Tenant", 2, "kind Profile"},
		"name is not the file":   {"name: standard", "name: short", 3, `"short" differs from the file's name "standard"`},
		"mode unknown":           {"mode: allow-list", "mode: open", 5, `"open": want deny or allow-list`},
		"deny with allow":        {"mode: allow-list", "mode: deny", 7, "an allow list with mode deny"},
		"allow-list empty":       {"  allow:\n    - registry.example.com:443\n    - 10.0.0.0/8:5432\n    - \"*.example.org:443\"\n    - \"[2001:db8::/32]:443\"\n", "", 5, "required with mode allow-list"},
		"allow without port":     {"- registry.example.com:443", "- registry.example.com", 7, "want host:port"},
		"allow port zero":        {"- registry.example.com:443", "- registry.example.com:0", 7, `port "0": want 1 to 65535`},
		"allow port too big":     {"- registry.example.com:443", "- registry.example.com:70000", 7, "want 1 to 65535"},
		"allow port a name":      {"- registry.example.com:443", "- registry.example.com:https", 7, `port "https"`},
		"allow bad host":         {"- registry.example.com:443", "- registry_example.com:443", 7, "not a host name"},
		"allow url":              {"- registry.example.com:443", "- https://registry.example.com:443", 7, "network.allow[0]"},
		"allow cidr host bits":   {"10.0.0.0/8:5432", "10.0.0.1/8:5432", 8, "host bits set (the network is 10.0.0.0/8)"},
		"allow cidr bad mask":    {"10.0.0.0/8:5432", "10.0.0.0/33:5432", 8, "not a CIDR"},
		"allow bad wildcard":     {`"*.example.org:443"`, `"*example.org:443"`, 9, "not a host name"},
		"allow empty wildcard":   {`"*.example.org:443"`, `"*.:443"`, 9, "not *. followed by a domain name"},
		"allow inner wildcard":   {`"*.example.org:443"`, `"a.*.example.org:443"`, 9, "not a host name"},
		"allow ipv6 unbracketed": {`"[2001:db8::/32]:443"`, `"2001:db8::/32:443"`, 10, "want host:port"},
		"allow duplicate":        {"- 10.0.0.0/8:5432", "- registry.example.com:443", 8, `"registry.example.com:443" listed twice`},
		"command above max":      {"maxCommandDuration: 1m", "maxCommandDuration: 3m", 12, "3m is above maxDuration 2m"},
		"command zero":           {"maxCommandDuration: 1m", "maxCommandDuration: 0s", 12, "want above 0"},
		"max duration zero":      {"maxDuration: 2m", "maxDuration: 0s", 11, "required, above 0"},
		"max duration missing":   {"maxDuration: 2m\n", "", 1, "maxDuration: invalid document: required"},
		"max duration negative":  {"maxDuration: 2m", "maxDuration: -2m", 11, "not a duration"},
		"max duration not one":   {"maxDuration: 2m", "maxDuration: 2 minutes", 11, "not a duration"},
		"output bytes negative":  {"maxBytes: 65536", "maxBytes: -1", 14, "output.maxBytes: invalid document: -1"},
		"output lines zero":      {"maxLines: 2000", "maxLines: 0", 15, "output.maxLines"},
		"output missing":         {"output:\n  maxBytes: 65536\n  maxLines: 2000\n", "", 1, "output.maxBytes"},
		"duplicate secret":       {"[github-token-v3]", "[github-token-v3, github-token-v3]", 16, "listed twice"},
		"empty secret":           {"[github-token-v3]", `[""]`, 16, "not a secret version name"},
		"duplicate pool":         {"pools: [agents]", "pools: [agents, agents]", 17, "pools[1]"},
		"bad pool":               {"pools: [agents]", "pools: [a.b]", 17, "not a pool name"},
		"duplicate template":     {"templates: []", "templates: [base, base]", 18, "templates[1]"},
	})
}

func ptr(f float64) *float64 { return &f }

// TestPricingOptionalStates: warm, retained and storage may be left out,
// and a price left out is unknown (nil), never zero; a zero written down
// is a known zero.
func TestPricingOptionalStates(t *testing.T) {
	pr, err := tenancy.ParsePricing("pricing.yaml", []byte(`apiVersion: slipway.dev/v1alpha1
kind: Pricing
currency: credits
classes:
  bare: {active: 2}
  full: {warm: 0, active: 1, retained: 0.25, storage: 0.002}
pools: {a: bare, b: full}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := pr.Rate("a"); !ok || !reflect.DeepEqual(r, tenancy.Rates{Active: 2}) {
		t.Errorf("Rate(a) = %+v, %v; want active 2 and every other price unknown", r, ok)
	}
	if r, ok := pr.Rate("b"); !ok || !reflect.DeepEqual(r, tenancy.Rates{Warm: ptr(0), Active: 1, Retained: ptr(0.25), Storage: ptr(0.002)}) {
		t.Errorf("Rate(b) = %+v, %v", r, ok)
	}
}

func TestPricingRefusals(t *testing.T) {
	parse := func(p string, b []byte) error { _, err := tenancy.ParsePricing(p, b); return err }
	checkRefusals(t, testdata(t, "pricing.yaml"), "pricing.yaml", parse, map[string]refusal{
		"unknown field":   {"storage: 0.01", "storage: 0.01\n    gpu: 3", 9, "unknown field \"gpu\""},
		"wrong kind":      {"kind: Pricing", "kind: Prices", 2, "kind Pricing"},
		"no currency":     {"currency: credits", `currency: ""`, 3, "want a unit name"},
		"bad currency":    {"currency: credits", `currency: "1 eur"`, 3, "want a unit name"},
		"negative rate":   {"active: 1.0", "active: -1.0", 7, "classes.standard.active: invalid document: -1"},
		"infinite rate":   {"warm: 0.1", "warm: .inf", 6, "classes.standard.warm"},
		"missing active":  {"    active: 1.0\n", "", 6, "active: required"},
		"negative retain": {"active: 1.0", "active: 1.0\n    retained: -2", 8, "classes.standard.retained: invalid document: -2: want a rate per hour"},
		"negative store":  {"storage: 0.01", "storage: -0.5", 8, "classes.standard.storage: invalid document: -0.5: want a rate per GiB-hour"},
		"unknown class":   {"agents: standard", "agents: gpu", 10, `class "gpu" is not in classes (standard)`},
		"duplicate class": {"pools:", "  standard: {warm: 1, active: 1, storage: 1}\npools:", 9, "already defined"},
		"duplicate pool":  {"agents: standard", "agents: standard\n  agents: standard", 11, "already defined"},
		"bad class name":  {"  standard:", "  Standard:", 6, "not a class name"},
		"no classes":      {"classes:\n  standard:\n    warm: 0.1\n    active: 1.0\n    storage: 0.01\n", "", 1, "classes: invalid document: required"},
		"not a rate":      {"active: 1.0", "active: lots", 7, "got a "},
	})
}

func TestPeriodStart(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		period, now, start, end string
	}{
		{"day", "2024-03-10T15:04:05Z", "2024-03-10T00:00:00Z", "2024-03-11T00:00:00Z"},
		// Sunday: the ISO week began on the Monday before.
		{"week", "2024-03-10T15:04:05Z", "2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z"},
		{"week", "2024-03-11T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-18T00:00:00Z"},
		{"week", "2025-01-01T12:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z"},
		{"month", "2024-02-29T23:59:59Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"month", "2024-12-31T23:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		// Periods are UTC: 01:00 on the 1st at +05:00 is still the previous month in UTC.
		{"month", "2024-04-01T01:00:00+05:00", "2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z"},
		{"day", "2024-04-01T01:00:00+05:00", "2024-03-31T00:00:00Z", "2024-04-01T00:00:00Z"},
	} {
		b := tenancy.Budget{Amount: 1, Period: tc.period}
		if got := b.PeriodStart(at(tc.now)); !got.Equal(at(tc.start)) || got.Location() != time.UTC {
			t.Errorf("%s PeriodStart(%s) = %s, want %s", tc.period, tc.now, got, tc.start)
		}
		if got := b.PeriodEnd(at(tc.now)); !got.Equal(at(tc.end)) {
			t.Errorf("%s PeriodEnd(%s) = %s, want %s", tc.period, tc.now, got, tc.end)
		}
	}
	if got := (tenancy.Budget{Period: "fortnight"}).PeriodStart(time.Now()); !got.IsZero() {
		t.Errorf("unknown period: %s", got)
	}
}
