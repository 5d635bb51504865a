package controlapi

import (
	"context"
	"fmt"

	"github.com/slipway-dev/slipway/internal/idprefix"
)

// ResolveLimit is how many of the newest jobs Resolve looks among.
const ResolveLimit = 10000

// Resolve returns the whole id of the job idOrPrefix names: a whole id as
// it is, or the one job among the newest ResolveLimit this token sees
// whose id starts with the prefix (at least 6 characters after j-). No
// match and several matches are errors, the second listing the
// candidates (*idprefix.AmbiguousError).
func (c *Client) Resolve(ctx context.Context, idOrPrefix string) (string, error) {
	if err := idprefix.Check(idOrPrefix, "j-", "job"); err != nil {
		return "", err
	}
	if len(idOrPrefix) >= len("j-")+21 { // a whole id: j-, 11 hex of time, 10 random
		return idOrPrefix, nil
	}
	js, err := c.List(ctx, "", ResolveLimit)
	if err != nil {
		return "", fmt.Errorf("look up job %s: %w", idOrPrefix, err)
	}
	ids := make([]string, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return idprefix.Resolve(idOrPrefix, "j-", "job", fmt.Sprintf("the newest %d jobs of %s", ResolveLimit, c.base), ids)
}
