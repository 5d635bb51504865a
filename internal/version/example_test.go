package version_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/internal/version"
)

// An untagged build names its commit and says whether the tree was dirty; a
// release is a vX.Y.Z tag.
func ExampleUntagged() {
	v := version.Untagged("263dc05a73f15839dd4f8c51ed804848b6e4e1ce", true)
	fmt.Println(v, version.IsRelease(v))
	fmt.Println(version.IsRelease("v1.2.3"))
	// Output:
	// v0.0.0-263dc05a73f1-dirty false
	// true
}
