package tenancy_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

func Example() {
	tenant, err := tenancy.ParseTenant("tenants/acme.yaml", []byte(`apiVersion: slipway.dev/v1alpha1
kind: Tenant
name: acme
pools: [agents]
profiles: [standard]
concurrency: 2
queueBound: 20
budget: {amount: 5, period: week}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	profile, err := tenancy.ParseProfile("profiles/standard.yaml", []byte(`apiVersion: slipway.dev/v1alpha1
kind: Profile
name: standard
network: {mode: deny}
maxDuration: 2m
maxCommandDuration: 1m
output: {maxBytes: 65536, maxLines: 2000}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	prices, err := tenancy.ParsePricing("pricing.yaml", []byte(`apiVersion: slipway.dev/v1alpha1
kind: Pricing
currency: credits
classes:
  standard: {warm: 0.1, active: 1.0, storage: 0.01}
pools: {agents: standard}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rates, _ := prices.Rate("agents")
	_, known := prices.Rate("gpu")
	now := time.Date(2024, 3, 10, 15, 0, 0, 0, time.UTC) // a Sunday
	fmt.Println(tenant.Name, tenant.Concurrency, tenant.QueueBound)
	fmt.Println("budget period from", tenant.Budget.PeriodStart(now).Format(time.DateOnly))
	fmt.Println(profile.MaxDuration, profile.Network.Mode)
	fmt.Printf("worst case %.4f %s; gpu price known: %v\n", tenancy.WorstCase(rates, profile.MaxDuration), prices.Currency, known)

	_, err = tenancy.ParseProfile("profiles/short.yaml", []byte("apiVersion: slipway.dev/v1alpha1\nkind: Profile\nname: short\n"+
		"network: {mode: deny}\nmaxDuration: 5s\nmaxCommandDuration: 1m\noutput: {maxBytes: 1, maxLines: 1}\n"))
	fmt.Println(errors.Is(err, tenancy.ErrInvalid), err)
	// Output:
	// acme 2 20
	// budget period from 2024-03-04
	// 2m0s deny
	// worst case 0.0333 credits; gpu price known: false
	// true profiles/short.yaml:6: maxCommandDuration: invalid document: 1m is above maxDuration 5s
}
