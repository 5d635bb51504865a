package stream_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/control/internal/stream"
)

// A job's bounded output keeps its head and its tail and says what it
// dropped between them.
func ExampleBounded() {
	out := stream.NewBounded(1<<20, 4)
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(out, "line %d\n", i)
	}
	fmt.Print(out.String())
	fmt.Println(out.DroppedLines, "lines dropped")
	// Output:
	// line 1
	// line 2
	// [... 14 bytes, 2 lines dropped ...]
	// line 5
	// line 6
	// 2 lines dropped
}
