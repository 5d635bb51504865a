package dnstest_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"sync"

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

// A server answering from a function follows its answers as they change,
// as a cluster's Service names follow its Services.
func ExampleListenFunc() {
	var mu sync.Mutex
	services := map[string][]netip.Addr{}
	dns, err := dnstest.ListenFunc("127.0.0.1:0", func(name string) ([]netip.Addr, bool) {
		mu.Lock()
		defer mu.Unlock()
		addrs, ok := services[name]
		return addrs, ok
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dns.Close()
	const name = "echo.default.svc.cluster.local"
	_, err = dns.Resolver().LookupNetIP(context.Background(), "ip4", name+".")
	fmt.Println(err != nil)
	mu.Lock()
	services[name] = []netip.Addr{netip.MustParseAddr("10.0.0.12")}
	mu.Unlock()
	addrs, err := dns.Resolver().LookupNetIP(context.Background(), "ip4", name+".")
	fmt.Println(addrs, err)
	// Output:
	// true
	// [10.0.0.12] <nil>
}
