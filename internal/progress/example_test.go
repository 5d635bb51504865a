package progress_test

import (
	"os"

	"github.com/slipway-dev/slipway/internal/progress"
)

func ExamplePrinter() {
	// Outside a terminal (--progress always into a file or a pipe), each
	// change of the status line is a line of its own.
	p := progress.New(os.Stdout, false)
	defer p.Close()
	p.Statusf("pin: %d of %d references resolved", 0, 2)
	p.Statusf("pin: %d of %d references resolved", 2, 2)
	// Output:
	// pin: 0 of 2 references resolved
	// pin: 2 of 2 references resolved
}
