package dnstest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/slipway-dev/slipway/testharness/dnstest"
)

// A test starts a server with the names it answers, points a resolver at
// it, and reads back every question the resolver sent.
func ExampleStart() {
	// In a test, dnstest.Start(t, answers) closes it when the test ends.
	dns, err := dnstest.Listen(map[string][]string{"api.example.test": {"192.0.2.7"}})
	if err != nil {
		log.Fatal(err)
	}
	defer dns.Close()
	addrs, err := dns.Resolver().LookupNetIP(context.Background(), "ip4", "api.example.test")
	fmt.Println(addrs, err)
	_, err = dns.Resolver().LookupNetIP(context.Background(), "ip4", "nothing.example.test.")
	fmt.Println(err != nil)
	for _, q := range dns.Queries() {
		fmt.Println(q.Type, q.Name)
	}
	// Output:
	// [192.0.2.7] <nil>
	// true
	// A api.example.test
	// A nothing.example.test
}
