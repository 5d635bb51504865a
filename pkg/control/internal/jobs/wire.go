package jobs

import (
	"github.com/slipway-dev/slipway/pkg/api/controlapi"
	"github.com/slipway-dev/slipway/pkg/config/tenancy"
)

// wireProfile is a profile as the API shows it.
func wireProfile(p tenancy.Profile) controlapi.Profile {
	return controlapi.Profile{Name: p.Name, Network: controlapi.Network{Mode: p.Network.Mode, Allow: p.Network.Allow},
		MaxDuration: p.MaxDuration, MaxCommandDuration: p.MaxCommandDuration, MaxOutputBytes: p.MaxOutputBytes,
		MaxOutputLines: p.MaxOutputLines, Secrets: p.Secrets, Pools: p.Pools, Templates: p.Templates}
}
