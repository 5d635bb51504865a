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
