package cost

import (
	"strings"

	"github.com/slipway-dev/slipway/internal/sqlarg"
)

// sqlIn is query in a store's dialect. The ledger's SQL is written once:
// greatest( and least( for the larger and smaller of two values (SQLite's
// two-argument max and min), ? for placeholders (PostgreSQL's $n).
func sqlIn(pg bool, query string) string {
	if !pg {
		return strings.NewReplacer("greatest(", "max(", "least(", "min(").Replace(query)
	}
	return sqlarg.Dollar(query)
}
