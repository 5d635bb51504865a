package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// EnvVerifyCacheDir names the folder where the plugin keeps passing
// verification results between renders (the sidecar's emptyDir).
const EnvVerifyCacheDir = "SLIPWAY_VERIFY_CACHE_DIR"

// GenerateOptions are the plugin's generate flags.
type GenerateOptions struct {
	// CacheDir ("": none) keeps passing verification results.
	CacheDir string
	// Output is "yaml" (the default when empty) or "json": one compact
	// JSON object per line, which Argo CD's repo-server reads as JSON
	// without converting each YAML document (see render.WithJSONLines).
	Output string
}

// Output formats of the plugin's generate.
const (
	OutputYAML = "yaml"
	OutputJSON = "json"
)

// PluginGenerate is the config management plugin's generate, for the
// working directory wd Argo CD runs it in and the environment getenv
// reads: the pool named by the parameters, verified (against the
// operator's policy file when EnvPolicyFile names one), its objects
// written to stdout in o.Output and the policy used to stderr. A refusal
// wraps render.ErrNotVerified; any other error is the input's or the
// I/O's. `slipway argocd generate` and `slipway-cmp generate` are this.
func PluginGenerate(ctx context.Context, wd string, getenv func(string) string, o GenerateOptions, stdout, stderr io.Writer) error {
	var opts []render.Option
	switch o.Output {
	case "", OutputYAML:
	case OutputJSON:
		opts = append(opts, render.WithJSONLines())
	default:
		return fmt.Errorf("argocd: output %q: want %s or %s", o.Output, OutputYAML, OutputJSON)
	}
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
	if o.CacheDir != "" {
		c, err := policy.OpenCache(o.CacheDir)
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
	out := res.YAML
	if o.Output == OutputJSON {
		out = res.JSON
	}
	_, err = stdout.Write(out)
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
