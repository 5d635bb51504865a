package idprefix_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/internal/idprefix"
)

func ExampleResolve() {
	ids := []string{"g-1a4ee8c0", "g-1a4ee8f1", "g-77aa0012"}
	id, err := idprefix.Resolve("g-77aa00", "g-", "generation", "pool agents", ids)
	fmt.Println(id, err)
	_, err = idprefix.Resolve("g-1a4ee8", "g-", "generation", "pool agents", ids)
	fmt.Println(err)
	_, err = idprefix.Resolve("g-000000", "g-", "generation", "pool agents", ids)
	fmt.Println(err)
	// Output:
	// g-77aa0012 <nil>
	// generation g-1a4ee8 is ambiguous: it matches g-1a4ee8c0, g-1a4ee8f1
	// no generation matches g-000000 in pool agents
}
