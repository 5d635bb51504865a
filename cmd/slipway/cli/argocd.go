package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/cluster/argocd"
	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
)

// NewCmdArgoCD groups Slipway's Argo CD plugins.
func NewCmdArgoCD(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "argocd", Short: "Argo CD plugins: the config management plugin's commands and the ApplicationSet generator"}
	gen := &cobra.Command{Use: "generator", Short: "The ApplicationSet plugin generator"}
	gen.AddCommand(newCmdArgoCDGeneratorServe(g))
	cmd.AddCommand(newCmdArgoCDGenerate(g), newCmdArgoCDParameters(g), gen)
	return cmd
}

func newCmdArgoCDGenerate(g *globals) *cobra.Command {
	var o argocd.GenerateOptions
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "The config management plugin's generate: a pool's verified objects from the checked-out config repository",
		Long: `generate runs in the working directory Argo CD gives a config management plugin (the
application's source path in the checked-out config repository) and renders the pool named by
the parameter pool (ARGOCD_APP_PARAMETERS or PARAM_POOL; ARGOCD_ENV_POOL from the
Application's env) at ARGOCD_APP_REVISION, as slipway render does. The checkout is the whole
repository, or the pool's folder alone (ARGOCD_APP_SOURCE_PATH pools/<pool> and pool.yaml at
the top: Argo CD's reposerver.plugin.use.manifest.generate.paths with the Application's
annotation argocd.argoproj.io/manifest-generate-paths: .). Every generation is verified before
anything is printed, against the operator's policy when $SLIPWAY_ARGOCD_POLICY_FILE names one
(nothing in the checkout is then read as a policy), else against the repository's
policies/verification.yaml (or the parameter policy, a file in the repository, when it holds
none); a pool's folder alone with no operator policy is refused. stderr names the policy used;
a refusal names the generation, the pin and the failed check on stderr. A pool with no generation is an error unless the
parameter allow-empty is true (only while the pool is being removed). The output is a pure
function of the tree and the parameters. With --verify-cache-dir (default
$SLIPWAY_VERIFY_CACHE_DIR), passing verification results are kept there, keyed by the policy,
its keys and the image digest, and the next run answers from them. --output json prints one
compact JSON object per line instead of YAML: Argo CD's repo-server reads that stream as JSON,
without converting each YAML document (the plugin.yaml Slipway ships asks for it). Exit 0
rendered, 1 refused, 2 usage, input or I/O.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return usage(err)
			}
			o.Output = argocd.OutputYAML // -o text or yaml: YAML documents, as before -o was global
			if g.output == outputJSON {
				o.Output = argocd.OutputJSON
			}
			err = argocd.PluginGenerate(cmd.Context(), wd, os.Getenv, o, g.stdout, g.stderr)
			switch {
			case errors.Is(err, render.ErrNotVerified):
				return failed(err)
			case err != nil:
				return usage(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.CacheDir, "verify-cache-dir", os.Getenv(argocd.EnvVerifyCacheDir), "keep passing verification results here for the next run (a directory private to the plugin)")
	return cmd
}

func newCmdArgoCDParameters(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "parameters",
		Short: "The config management plugin's parameter announcement (JSON), naming the pools of the checked-out repository",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return usage(err)
			}
			if err := argocd.PluginParameters(wd, os.Getenv, g.stdout); err != nil {
				return usage(err)
			}
			return nil
		},
	}
}

func newCmdArgoCDGeneratorServe(g *globals) *cobra.Command {
	var rf repoFlags
	var listen, tokenFile string
	cmd := &cobra.Command{
		Use:   "serve --repo URL --token-file FILE --listen ADDR",
		Short: "Serve the ApplicationSet plugin generator: one parameter set per pool at the config repository's head",
		Long: `serve answers POST /api/v1/getparams.execute with a bearer token (the ApplicationSet
plugin generator protocol): one parameter set per pool (input parameters pool or pools filter
them) with pool, generation and sequence (the active one), target, warming, draining and
retained generation ids (comma separated), configRevision (the head commit) and pins.<kind>
(the active generation's pinned identities). A missing or wrong token gets 403 and an empty
body; malformed input gets 400 with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" || listen == "" {
				return usage(errors.New("--repo and --listen are required"))
			}
			tok, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			repo, err := gitops.Open(cmd.Context(), rf.repo, rf.options()...)
			if err != nil {
				return usage(err)
			}
			h, err := argocd.NewGenerator(repo, rf.branch, []byte(tok))
			if err != nil {
				return usage(err)
			}
			err = argocd.Serve(cmd.Context(), listen, h, func(addr string) { fmt.Fprintf(g.stderr, "serving on %s\n", addr) })
			if err != nil {
				return usage(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rf.repo, "repo", "", "config repository (path, file://, http(s)://, ssh://; credentials as for promote)")
	cmd.Flags().StringVar(&rf.branch, "branch", "main", "the config repository's branch")
	cmd.Flags().StringVar(&rf.cacheDir, "cache-dir", "", "keep a bare clone here between requests and runs (default: a shallow clone in memory)")
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve on, e.g. 127.0.0.1:4355")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the bearer token the ApplicationSet controller sends")
	return cmd
}
