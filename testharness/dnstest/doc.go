// Package dnstest is a DNS server for tests, on 127.0.0.1 (UDP): it answers
// A and AAAA questions from a table the test gives, NXDOMAIN for every other
// name, and keeps every question it was asked, so that a test can count the
// queries a component made (none, for a name it must not look up) with
// nothing sent off the machine. Resolver is a Go resolver that asks it and
// nothing else. ListenFunc answers from a function instead, on an address
// the test names (kubetest serves its cluster's Service names that way, on
// the node's bridge).
//
// It is not a general DNS server: no recursion, no zones, no TCP, no
// record types other than A and AAAA (every other question gets an empty
// answer).
package dnstest
