package spelling_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/internal/spelling"
)

// A transposition costs one, as a substitution does.
func ExampleDistance() {
	fmt.Println(spelling.Distance("stauts", "status"), spelling.Distance("bsae", "base"), spelling.Distance("pin", "lint"))
	// Output: 1 1 2
}
