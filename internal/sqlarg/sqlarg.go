package sqlarg

import (
	"strconv"
	"strings"
)

// Dollar is query with its n-th ? written $n.
func Dollar(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
