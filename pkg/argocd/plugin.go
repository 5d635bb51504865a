package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/slipway-dev/slipway/pkg/policy"
	"github.com/slipway-dev/slipway/pkg/render"
)

// EnvVerifyCacheDir names the folder where the plugin keeps passing
// verification results between renders (the sidecar's emptyDir).
const EnvVerifyCacheDir = "SLIPWAY_VERIFY_CACHE_DIR"

// PluginGenerate is the config management plugin's generate, for the
// working directory wd Argo CD runs it in and the environment getenv
// reads: the pool named by the parameters, verified (against the
// operator's policy file when EnvPolicyFile names one), its objects
// written to stdout and the policy used to stderr. cacheDir ("": none)
// keeps passing verification results. A refusal wraps
// render.ErrNotVerified; any other error is the input's or the I/O's.
// `slipway argocd generate` and `slipway-cmp generate` are this.
func PluginGenerate(ctx context.Context, wd string, getenv func(string) string, cacheDir string, stdout, stderr io.Writer) error {
	env, err := ReadEnv(getenv)
	if err != nil {
		return err
	}
	co, err := Locate(wd, getenv("ARGOCD_APP_SOURCE_PATH"))
	if err != nil {
		return err
	}
	var op *OperatorPolicy
	if f := getenv(EnvPolicyFile); f != "" {
		if op, err = LoadOperatorPolicy(f); err != nil {
			return err
		}
	}
	var opts []render.Option
	if cacheDir != "" {
		c, err := policy.OpenCache(cacheDir)
		if err != nil {
			return err
		}
		opts = append(opts, render.WithVerifyCache(c))
	}
	res, used, err := Generate(ctx, co, env, op, opts...)
	if err != nil {
		return err
	}
	if used != nil {
		fmt.Fprintf(stderr, "slipway argocd generate: pool %s verified against the policy of the %s; checkout: %s\n", env.Params.Pool, used, co.Layout())
	}
	_, err = stdout.Write(res.YAML)
	return err
}

// PluginParameters is the config management plugin's parameter
// announcement (one JSON line naming the checkout's pools) for the
// working directory wd. `slipway argocd parameters` and `slipway-cmp
// parameters` are this.
func PluginParameters(wd string, getenv func(string) string, stdout io.Writer) error {
	co, err := Locate(wd, getenv("ARGOCD_APP_SOURCE_PATH"))
	if err != nil {
		return err
	}
	a, err := Announce(co)
	if err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
