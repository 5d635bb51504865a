package runnermeta_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/api/runnermeta"
)

// A reader of an image config tells a runner image by its labels.
func Example() {
	labels := map[string]string{runnermeta.LabelSHA256: "ca63ab06", runnermeta.LabelProtocol: "1"}
	_, isRunner := labels[runnermeta.LabelSHA256]
	fmt.Println(isRunner, labels[runnermeta.LabelProtocol])
	// Output: true 1
}
