package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/cluster/render"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// NewCmdRender prints a pool's Kubernetes objects at a config revision.
func NewCmdRender(g *globals) *cobra.Command {
	var (
		rf       repoFlags
		vf       verifierFlags
		revision string
	)
	cmd := &cobra.Command{
		Use:   "render --repo R --pool P [--revision COMMIT]",
		Short: "Print a pool's agent-sandbox objects (SandboxTemplate, SandboxWarmPool) at a config revision, verified first",
		Long: `render builds the pool's kustomization.yaml with what Slipway generates for each generation
in desired.yaml: a SandboxTemplate per generation and a SandboxWarmPool per warming or active
one, and prints them as multi-document YAML (with -o json, the summary). Every generation's
image pins are verified against the repository's policies/verification.yaml first (or
--policy when it holds none); if one does not verify, nothing is printed and the refusal says
which generation, pin and check. Exit 0 rendered, 1 refused, 2 usage, input or I/O.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" || rf.pool == "" {
				return usage(errors.New("--repo and --pool are required"))
			}
			res, err := renderPool(cmd, &rf, &vf, revision)
			if err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(res)
			}
			_, err = g.stdout.Write(res.YAML)
			return err
		},
	}
	rf.add(cmd)
	vf.add(cmd)
	cmd.Flags().StringVar(&revision, "revision", "", "the config repository commit to render (full id; default: the branch head)")
	return cmd
}

// renderPool renders the pool of rf at revision (the branch head when
// empty), verified as vf says, for render and apply. Errors carry their
// exit code: 1 not verified, 2 the rest.
func renderPool(cmd *cobra.Command, rf *repoFlags, vf *verifierFlags, revision string) (*render.Result, error) {
	pol, err := vf.load()
	if err != nil {
		return nil, err
	}
	opts := rf.options()
	if revision != "" {
		opts = append(opts, gitops.WithDepth(0)) // an older revision needs the history
	}
	repo, err := gitops.Open(cmd.Context(), rf.repo, opts...)
	if err != nil {
		return nil, usage(err)
	}
	tree, rev, err := repo.SnapshotAt(cmd.Context(), rf.branch, revision)
	if err != nil {
		return nil, usage(err)
	}
	ropts := []render.Option{render.WithVerifyCache(policy.NewCache())}
	if pol != nil {
		ropts = append(ropts, render.WithPolicy(pol))
	}
	if vf.skip {
		ropts = append(ropts, render.WithInsecureSkipVerify())
	}
	res, err := render.Pool(cmd.Context(), tree, rf.pool, rev, ropts...)
	if errors.Is(err, render.ErrNotVerified) {
		return nil, failed(err)
	}
	if err != nil {
		return nil, usage(err)
	}
	return res, nil
}
