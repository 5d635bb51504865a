package argocd

import (
	"fmt"
	"strings"

	"github.com/slipway-dev/slipway/pkg/config/pool"
)

// Announcement is one entry of Argo CD's ParameterAnnouncement list (what
// plugin.yaml's parameters.static holds and parameters.dynamic prints).
type Announcement struct {
	Name           string            `json:"name"`
	Title          string            `json:"title,omitempty"`
	Tooltip        string            `json:"tooltip,omitempty"`
	Required       bool              `json:"required,omitempty"`
	ItemType       string            `json:"itemType,omitempty"`
	CollectionType string            `json:"collectionType,omitempty"`
	String         string            `json:"string,omitempty"`
	Array          []string          `json:"array,omitempty"`
	Map            map[string]string `json:"map,omitempty"`
}

// Static is the plugin's fixed parameters.
func Static() []Announcement {
	return []Announcement{
		{Name: ParamPool, Title: "Pool", Required: true, ItemType: "string", CollectionType: "string",
			Tooltip: "the pool to render (a folder of pools/); every generation in its desired.yaml is verified first"},
		{Name: ParamPolicy, Title: "Verification policy", ItemType: "string", CollectionType: "string",
			Tooltip: "a VerificationPolicy file in the repository, used only when the repository holds no " + pool.PolicyPath},
		{Name: ParamAllowEmpty, Title: "Allow an empty render", ItemType: "boolean", CollectionType: "string", String: "false",
			Tooltip: "true only while the pool is being removed: an empty render with auto-sync and prune deletes every object of the pool"},
	}
}

// Announce is the dynamic announcement for the checkout co: the
// static parameters, with the pools found in the tree named in pool's
// tooltip (and as its default when there is only one). Argo CD's
// announcement has no list of choices, and a separate "pools" parameter
// would be one more thing a user could set that generate does not read.
func Announce(co Checkout) ([]Announcement, error) {
	tree, err := co.Open()
	if err != nil {
		return nil, fmt.Errorf("argocd: %w", err)
	}
	defer tree.Close()
	names, err := tree.List("pools")
	if err != nil {
		return nil, fmt.Errorf("argocd: %w", err)
	}
	var pools []string
	for _, n := range names {
		if _, err := tree.ReadFile(pool.PoolFile(n)); err == nil && pool.ValidName(n) {
			pools = append(pools, n)
		}
	}
	a := Static()
	switch len(pools) {
	case 0:
		a[0].Tooltip += "; this repository holds no pool yet"
	case 1:
		a[0].String = pools[0]
		fallthrough
	default:
		a[0].Tooltip += "; this repository holds: " + strings.Join(pools, ", ")
	}
	return a, nil
}
