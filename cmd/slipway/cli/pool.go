package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release"
)

// NewCmdPool groups the verbs on a pool's settings (pools/<pool>/pool.yaml).
func NewCmdPool(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Show and change a pool's settings (pools/<pool>/pool.yaml) in the config repository",
	}
	cmd.AddCommand(newCmdPoolShow(g), newCmdPoolSet(g))
	return cmd
}

// poolError maps errors of pool verbs to exit codes: a bad setting or
// pool.yaml is 2, conflicts and lost races 1, the rest as releaseError.
func poolError(err error) error {
	if errors.Is(err, pool.ErrSetting) || errors.Is(err, pool.ErrInvalid) || errors.Is(err, release.ErrLimitUnavailable) {
		return usage(err)
	}
	return releaseError(err)
}

func newCmdPoolShow(g *globals) *cobra.Command {
	var rf repoFlags
	cmd := &cobra.Command{
		Use:   "show --repo URL --pool P [--output json]",
		Short: "Print a pool's settings under the names `pool set` takes (defaults marked)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" || rf.pool == "" {
				return usage(errors.New("--repo and --pool are required"))
			}
			ps, err := release.ShowPool(cmd.Context(), rf.repo, rf.branch, rf.pool, rf.options()...)
			if err != nil {
				return poolError(err)
			}
			if g.json() {
				return g.printJSON(ps)
			}
			fmt.Fprintf(g.stdout, "pool %s (%s at %s)\n", ps.Pool, ps.File, ps.Revision)
			for _, s := range ps.Settings {
				v := s.Value
				switch {
				case s.Field == "proofs" && s.Default:
					v = "(all: " + strings.Join(pool.Proofs, ",") + ")"
				case s.Default:
					v += "  (default)"
				case v == "":
					v = "(none)"
				}
				fmt.Fprintf(g.stdout, "  %-30s %s\n", s.Field, v)
			}
			return nil
		},
	}
	rf.add(cmd)
	return cmd
}

func newCmdPoolSet(g *globals) *cobra.Command {
	var (
		rf                           repoFlags
		review, message              string
		runtimeURL, runtimeTokenFile string
	)
	cmd := &cobra.Command{
		Use:   "set --repo URL --pool P FIELD=VALUE... [--branch B] [--message M] [--runtime URL --token-file F]",
		Short: "Change a pool's settings in one reviewed commit (validated first; comments and key order kept)",
		Long: `Set changes settings of pools/<pool>/pool.yaml in one commit with Slipway-Pool and
Slipway-Step: pool-set trailers, the changes listed in its message. Every FIELD=VALUE, then
the whole resulting pool.yaml, is validated before anything is written. Comments and key
order are kept. The edit is pushed with a compare-and-swap and re-applied on a lost race,
never forced. Settings that already have their values make no commit (unchanged).
--branch NAME pushes to a new branch for review instead of the tracked branch (--base).
With --runtime, the runtime serving the pool is asked (GET /v1/info) which limits it can
apply here: a result setting one it cannot (not enforced and not in acceptUnenforced, or
above its maximum) is refused before anything is written, naming the pool, the limit and
the runtime's reason. Without it, the runtime refuses such a pool when it serves it.

Fields: requiredKinds, warmSize, refillPerSecond, readyTimeout, phaseDeadlines.PHASE
(` + strings.Join(pool.Phases, ", ") + `), drainDeadline, onDrainDeadline,
rollbackWindow, restoreWindow, network, network.allow, limits.cpu, limits.memory,
limits.pids, limits.openFiles, limits.workspace, acceptUnenforced, proofs. Lists are
comma-separated; an empty phase deadline goes back to the default, empty proofs means all
of them, an empty limit unsets it, network=deny also empties network.allow.
Exit 0 set (or unchanged), 1 conflict or lost every race, 2 bad field or value (or a limit the
runtime cannot apply), or I/O.`,
		Example: `  slipway pool set --repo ./config.git --pool agents warmSize=4 phaseDeadlines.warm=10m onDrainDeadline=stop
  slipway pool set --repo https://git.example/config.git --pool agents rollbackWindow=48h \
      --branch pool/agents-window --message "Keep g-… longer while incident 42 is open"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rf.repo == "" || rf.pool == "" {
				return usage(errors.New("--repo and --pool are required"))
			}
			var set []pool.Assignment
			for _, a := range args {
				as, err := pool.ParseAssignment(a)
				if err != nil {
					return usage(err)
				}
				set = append(set, as)
			}
			ps := release.PoolSet{
				Repo: rf.repo, Branch: rf.branch, ReviewBranch: review, Pool: rf.pool,
				Set: set, Message: message, RepoOptions: rf.options(),
			}
			if runtimeURL != "" {
				tok, err := readToken(runtimeTokenFile)
				if err != nil {
					return err
				}
				c, err := runtimeapi.NewClient(runtimeURL, tok)
				if err != nil {
					return usage(err)
				}
				info, err := c.Info(cmd.Context())
				if err != nil {
					return fmt.Errorf("pool set: ask the runtime which limits it can apply: %w", err)
				}
				ps.Runtime = &info.Limits
			}
			res, err := release.SetPool(cmd.Context(), ps)
			if err != nil {
				return poolError(err)
			}
			if g.json() {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "%s %s %s on %s\n", res.Status, res.Commit, rf.pool, res.Branch)
			for _, c := range res.Changes {
				fmt.Fprintf(g.stdout, "  %s\n", c)
			}
			return nil
		},
	}
	rf.addNamed(cmd, "base")
	cmd.Flags().Lookup("base").Usage = "the config repository's tracked branch, read and (without --branch) written"
	cmd.Flags().StringVar(&review, "branch", "", "push the commit to this new branch for review instead of the tracked branch")
	cmd.Flags().StringVar(&message, "message", "", "why (the commit message's body)")
	cmd.Flags().StringVar(&runtimeURL, "runtime", "", "the URL of the runtime serving the pool: refuse limits it cannot apply")
	cmd.Flags().StringVar(&runtimeTokenFile, "token-file", "", "file holding the runtime's API token (with --runtime)")
	return cmd
}
