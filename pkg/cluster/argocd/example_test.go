package argocd_test

import (
	"fmt"

	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
)

// The plugin's environment as Argo CD's repo-server sets it for an
// Application with the parameter pool and the env entry ALLOW_EMPTY.
func ExampleReadEnv() {
	env := map[string]string{
		"ARGOCD_APP_NAME":        "pool-agents",
		"ARGOCD_APP_REVISION":    "0123456789abcdef0123456789abcdef01234567",
		"ARGOCD_APP_SOURCE_PATH": "pools/agents",
		"ARGOCD_APP_PARAMETERS":  `[{"name":"pool","string":"agents"}]`,
		"PARAM_POOL":             "agents",
		"ARGOCD_ENV_ALLOW_EMPTY": "false",
	}
	e, err := argocd.ReadEnv(func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("pool %s at %s, allow-empty %v\n", e.Params.Pool, e.Revision[:12], e.Params.AllowEmpty)
	// Output: pool agents at 0123456789ab, allow-empty false
}
