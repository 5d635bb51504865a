package sqlarg_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/internal/sqlarg"
)

func ExampleDollar() {
	fmt.Println(sqlarg.Dollar(`UPDATE intervals SET end_ns = ? WHERE sandbox_id = ? AND end_ns IS NULL`))
	// Output: UPDATE intervals SET end_ns = $1 WHERE sandbox_id = $2 AND end_ns IS NULL
}
