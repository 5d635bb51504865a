package console_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/console"
)

// Clean removes what a terminal would act on before a page shows it;
// html/template then escapes the markup.
func ExampleClean() {
	fmt.Printf("%q\n", console.Clean("\x1b[31mred\x1b[0m <b>bold</b>\x1b]0;title\x07 done\r\n"))
	// Output:
	// "red <b>bold</b> done\n"
}

// Serving says which generations' runs a pool page's warm-hit fraction
// reads: those taking or running claims, not those kept for rollback.
func ExampleServing() {
	for _, st := range []string{"active", "draining", "warming", "retained"} {
		fmt.Println(st, console.Serving(st))
	}
	// Output:
	// active true
	// draining true
	// warming true
	// retained false
}
