package tenancy_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

func seeds(f *testing.F, file string, more ...string) {
	good, err := os.ReadFile("testdata/" + file)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, m := range more {
		f.Add([]byte(m))
	}
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte("apiVersion: slipway.dev/v1alpha1\n"))
}

// refused fails the test for an error outside ErrInvalid.
func refused(t *testing.T, err error) bool {
	if err == nil {
		return false
	}
	if !errors.Is(err, tenancy.ErrInvalid) {
		t.Fatalf("error outside ErrInvalid: %v", err)
	}
	return true
}

// FuzzParseTenant: ParseTenant never panics, refuses only with ErrInvalid,
// and what it accepts keeps the rules it checks.
func FuzzParseTenant(f *testing.F) {
	seeds(f, "tenant.yaml",
		"apiVersion: slipway.dev/v1alpha1\nkind: Tenant\nname: acme\npools: [a]\nprofiles: [p]\nconcurrency: 1\nqueueBound: 1\nbudget: {amount: 0, period: month}\n",
		"apiVersion: slipway.dev/v1alpha1\nkind: Tenant\nname: acme\nconcurrency: 1e3\nbudget: {amount: .inf}\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		tn, err := tenancy.ParseTenant("tenants/acme.yaml", b)
		if refused(t, err) {
			return
		}
		if tn.Name != "acme" || tn.Concurrency < 1 || tn.QueueBound < 1 || len(tn.Pools) == 0 || len(tn.Profiles) == 0 ||
			(tn.Budget != nil && (tn.Budget.Amount < 0 || tn.Budget.PeriodStart(time.Now()).IsZero())) {
			t.Fatalf("accepted %+v from %q", tn, b)
		}
	})
}

// FuzzParseProfile: ParseProfile never panics, refuses only with
// ErrInvalid, and what it accepts keeps the rules it checks.
func FuzzParseProfile(f *testing.F) {
	seeds(f, "profile.yaml",
		"apiVersion: slipway.dev/v1alpha1\nkind: Profile\nname: standard\nnetwork: {mode: deny}\nmaxDuration: 5s\noutput: {maxBytes: 1, maxLines: 1}\n",
		"apiVersion: slipway.dev/v1alpha1\nkind: Profile\nname: standard\nnetwork: {mode: allow-list, allow: ['[::1]:1', '*.a:2', '::/0:3']}\nmaxDuration: 1h\nmaxCommandDuration: 1h\noutput: {maxBytes: 1, maxLines: 1}\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := tenancy.ParseProfile("profiles/standard.yaml", b)
		if refused(t, err) {
			return
		}
		if p.Name != "standard" || p.MaxDuration <= 0 || p.MaxCommandDuration < 0 || p.MaxCommandDuration > p.MaxDuration ||
			p.MaxOutputBytes <= 0 || p.MaxOutputLines <= 0 || (p.Network.Mode == "deny") == (len(p.Network.Allow) > 0) {
			t.Fatalf("accepted %+v from %q", p, b)
		}
	})
}

// FuzzParsePricing: ParsePricing never panics, refuses only with
// ErrInvalid, and every pool it accepts has a known, non-negative active
// price and no negative price of another state.
func FuzzParsePricing(f *testing.F) {
	seeds(f, "pricing.yaml",
		"apiVersion: slipway.dev/v1alpha1\nkind: Pricing\ncurrency: eur\nclasses: {a: {warm: 0, active: 0, storage: 0}}\n",
		"apiVersion: slipway.dev/v1alpha1\nkind: Pricing\ncurrency: eur\nclasses: {a: {warm: -0, active: 1e308, storage: 0x10}}\npools: {p: a, q: b}\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := tenancy.ParsePricing("pricing.yaml", b)
		if refused(t, err) {
			return
		}
		for pool := range p.Pools {
			r, ok := p.Rate(pool)
			neg := func(p *float64) bool { return p != nil && !(*p >= 0) }
			if !ok || !(r.Active >= 0) || neg(r.Warm) || neg(r.Retained) || neg(r.Storage) {
				t.Fatalf("pool %s: %+v, %v from %q", pool, r, ok, b)
			}
		}
	})
}
