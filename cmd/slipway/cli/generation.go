package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/internal/atomicfile"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// NewCmdGeneration groups the generation verbs.
func NewCmdGeneration(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "generation", Short: "Create, show and compare generations (the pinned artifacts a pool runs)"}
	cmd.AddCommand(newCmdGenerationCreate(g), newCmdGenerationShow(g), newCmdGenerationDiff(g), newCmdGenerationList(g))
	return cmd
}

// parseRange reads "MIN-MAX" (or one number).
func parseRange(flag, s string) (generation.Range, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil {
		return generation.Range{}, fmt.Errorf("--%s %q: want MIN-MAX, e.g. 3-4", flag, s)
	}
	return generation.Range{Min: a, Max: b}, nil
}

// verifierFlags are how a command verifies pins: a policy file, or the
// visibly named skip.
type verifierFlags struct {
	policyFile string
	skip       bool
}

func (f *verifierFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.policyFile, "policy", "", "VerificationPolicy file every image pin is verified against")
	cmd.Flags().BoolVar(&f.skip, "insecure-skip-verify", false, "do not verify signatures and attestations (never in production)")
}

func (f *verifierFlags) load() (*policy.Policy, error) {
	if f.policyFile == "" {
		return nil, nil
	}
	if f.skip {
		return nil, usage(errors.New("--policy and --insecure-skip-verify contradict each other"))
	}
	p, err := policy.Load(f.policyFile)
	if err != nil {
		return nil, usage(err)
	}
	return p, nil
}

// releaseError maps release errors to exit codes: refusals and conflicts
// are 1, the rest 2.
func releaseError(err error) error {
	if errors.Is(err, release.ErrRefused) || errors.Is(err, gitops.ErrConflict) || errors.Is(err, gitops.ErrRetriesExhausted) {
		return failed(err)
	}
	return usage(err)
}

func newCmdGenerationCreate(g *globals) *cobra.Command {
	var (
		poolName, from, output string
		pins, require          []string
		cpProto, runnerProto   string
		vf                     verifierFlags
	)
	cmd := &cobra.Command{
		Use:   "create --pool P --pin KIND=REF ... --policy FILE --out-file FILE",
		Short: "Build a generation, verify every image pin against the policy, write it and print its id",
		Long: `Create builds the pool's next generation: the pins given, and every other pin copied from
--from. Image kinds take a reference with a digest (a tag is refused), policy takes
REPO@COMMIT[#REF] (the config repository commit the policy is read at), secretVersion
the secret's path and version (vault://kv/agents/token#3: the version is part of the
identity), the others an opaque ID[#TAG]. Every image pin is verified against the
verification policy before anything is written; a refusal names the pin and the failed
checks (exit 1). So is a runner pin whose image is not a runner image, and a
workspaceTemplate pin that is not a template image: their config labels say what they
are. The id is g- and the sha256 of the canonical pins and compatibility.`,
		Example: `  slipway generation create --pool agents --policy policies/verification.yaml --out-file g1.yaml \
    --pin workspaceTemplate=127.0.0.1:5000/templates/agent-tools:demo@sha256:... \
    --pin runner=127.0.0.1:5000/platform/runner:v0.9.2@sha256:... \
    --pin controlPlane=127.0.0.1:5000/platform/control-plane:v1.4.0@sha256:... \
    --control-plane-protocol 1-2 --runner-protocol 1-1
  slipway generation create --pool agents --from g1.yaml --pin runner=...@sha256:... --policy p.yaml --out-file g2.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if poolName == "" || output == "" {
				return usage(errors.New("--pool and --out-file are required"))
			}
			pol, err := vf.load()
			if err != nil {
				return err
			}
			if pol == nil && !vf.skip {
				return usage(errors.New("--policy FILE is required (or the visibly unsafe --insecure-skip-verify)"))
			}
			n := release.NewGeneration{Pool: poolName, Pins: map[generation.Kind]generation.Pin{}, Verify: release.Verifier{Policy: pol, Skip: vf.skip}}
			for _, p := range pins {
				k, pin, err := generation.ParsePin(p)
				if err != nil {
					return usage(fmt.Errorf("--%w", err))
				}
				if _, dup := n.Pins[k]; dup {
					return usage(fmt.Errorf("--pin %s given twice", k))
				}
				n.Pins[k] = pin
			}
			for _, r := range require {
				k, err := generation.ParseKind(r)
				if err != nil {
					return usage(fmt.Errorf("--require %q: %w", r, err))
				}
				n.Required = append(n.Required, k)
			}
			if from != "" {
				if n.From, err = generation.Load(from); err != nil {
					return usage(err)
				}
			}
			if cpProto != "" || runnerProto != "" {
				c := &generation.Compatibility{}
				if n.From != nil {
					*c = n.From.Compatibility
				}
				if cpProto != "" {
					if c.ControlPlaneProtocol, err = parseRange("control-plane-protocol", cpProto); err != nil {
						return usage(err)
					}
				}
				if runnerProto != "" {
					if c.RunnerProtocol, err = parseRange("runner-protocol", runnerProto); err != nil {
						return usage(err)
					}
				}
				n.Compat = c
			}
			gen, err := release.CreateGeneration(cmd.Context(), n)
			if err != nil {
				return releaseError(err)
			}
			doc, err := generation.Marshal(gen)
			if err != nil {
				return usage(err)
			}
			if err := atomicfile.Write(output, doc, 0o644); err != nil {
				return usage(err)
			}
			if err := g.ci(generationStep(gen, output)); err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(map[string]any{"id": gen.ID, "pool": gen.Pool, "sequence": gen.Sequence, "file": output})
			}
			fmt.Fprintln(g.stdout, gen.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&poolName, "pool", "", "the pool")
	cmd.Flags().StringArrayVar(&pins, "pin", nil, "KIND=VALUE (repeatable): "+kindNames())
	cmd.Flags().StringVar(&from, "from", "", "previous generation file: unchanged pins are copied, sequence is its plus 1")
	cmd.Flags().StringVar(&output, flagOutFile, "", "write the Generation document here (was --output, kept for one release)")
	cmd.Flags().StringVar(&cpProto, "control-plane-protocol", "", "MIN-MAX control-plane protocol versions the generation works with")
	cmd.Flags().StringVar(&runnerProto, "runner-protocol", "", "MIN-MAX runner protocol versions")
	cmd.Flags().StringSliceVar(&require, "require", nil, "kinds that must be pinned (the pool's requiredKinds)")
	vf.add(cmd)
	return cmd
}

func kindNames() string {
	var s []string
	for _, k := range generation.Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// repoFlags name the config repository and pool for commands that read
// generations from it.
type repoFlags struct {
	repo, pool, branch, cacheDir string
}

// branchFlag is the tracked branch's flag name: "branch" where a command
// only reads, "base" for promote (whose --branch names a review branch).

func (f *repoFlags) add(cmd *cobra.Command) { f.addNamed(cmd, "branch") }

func (f *repoFlags) addNamed(cmd *cobra.Command, branchFlag string) {
	cmd.Flags().StringVar(&f.repo, "repo", "", "config repository (path, file://, http(s)://, ssh://; credentials from $SLIPWAY_GIT_TOKEN (or the file $SLIPWAY_GIT_TOKEN_FILE) or $SLIPWAY_GIT_USERNAME/$SLIPWAY_GIT_PASSWORD, ssh from $SLIPWAY_GIT_SSH_KEY or the agent)")
	cmd.Flags().StringVar(&f.pool, "pool", "", "the pool")
	cmd.Flags().StringVar(&f.branch, branchFlag, "main", "the config repository's branch")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "keep a bare clone here between runs and fetch into it (default: a shallow clone in memory)")
}

func (f *repoFlags) options() []gitops.Option {
	if f.cacheDir == "" {
		return nil
	}
	return []gitops.Option{gitops.WithCacheDir(f.cacheDir)}
}

// loadGeneration reads a generation from a file, or by id or unique id
// prefix from the config repository (--pool narrows the search to a pool).
func (f *repoFlags) loadGeneration(cmd *cobra.Command, arg string) (*generation.Generation, error) {
	if !strings.HasPrefix(arg, "g-") {
		gen, err := generation.Load(arg)
		if err != nil {
			return nil, usage(err)
		}
		return gen, nil
	}
	if f.repo == "" {
		if _, err := os.Stat(arg); err == nil {
			gen, err := generation.Load(arg)
			if err != nil {
				return nil, usage(err)
			}
			return gen, nil
		}
		return nil, usage(fmt.Errorf("%s: give --repo to read a generation by id, or a file", arg))
	}
	gen, err := release.ReadGeneration(cmd.Context(), f.repo, f.branch, f.pool, arg, f.options()...)
	if err != nil {
		return nil, usage(err)
	}
	return gen, nil
}

// resolveGeneration is the whole id of the generation arg names (a whole
// id or a unique prefix) in the config repository.
func (f *repoFlags) resolveGeneration(cmd *cobra.Command, arg string) (string, error) {
	if generation.ValidID(arg) {
		return arg, nil // a whole id: the verb says whether the repository has it
	}
	id, err := release.ResolveGeneration(cmd.Context(), f.repo, f.branch, f.pool, arg, f.options()...)
	if err != nil {
		return "", usage(err)
	}
	return id, nil
}

func newCmdGenerationShow(g *globals) *cobra.Command {
	var rf repoFlags
	cmd := &cobra.Command{
		Use:   "show ID|FILE",
		Short: "Print a generation (from a file, or by id or unique id prefix from the config repository)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gen, err := rf.loadGeneration(cmd, args[0])
			if err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(gen)
			}
			doc, err := generation.Marshal(gen)
			if err != nil {
				return usage(err)
			}
			_, err = g.stdout.Write(doc)
			return err
		},
	}
	rf.add(cmd)
	return cmd
}

func newCmdGenerationDiff(g *globals) *cobra.Command {
	var rf repoFlags
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Which pins changed from generation A to B, with tags and digests",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := rf.loadGeneration(cmd, args[0])
			if err != nil {
				return err
			}
			b, err := rf.loadGeneration(cmd, args[1])
			if err != nil {
				return err
			}
			d := generation.Diff(a, b)
			if g.json() {
				type change struct {
					Kind         generation.Kind `json:"kind"`
					From         *generation.Pin `json:"from,omitempty"`
					To           *generation.Pin `json:"to,omitempty"`
					SameIdentity bool            `json:"sameIdentity"`
				}
				var cs []change
				for _, c := range d.Pins {
					ch := change{Kind: c.Kind, SameIdentity: c.SameIdentity()}
					if !c.Added() {
						f := c.From
						ch.From = &f
					}
					if !c.Removed() {
						t := c.To
						ch.To = &t
					}
					cs = append(cs, ch)
				}
				out := map[string]any{"from": a.ID, "to": b.ID, "changes": cs}
				if d.Compatibility != nil {
					out["compatibility"] = d.Compatibility.String()
				}
				return g.printJSON(out)
			}
			fmt.Fprintf(g.stdout, "%s (sequence %d) -> %s (sequence %d)\n", a.ID, a.Sequence, b.ID, b.Sequence)
			if d.Empty() {
				fmt.Fprintln(g.stdout, "  no changes")
			}
			for _, c := range d.Pins {
				fmt.Fprintf(g.stdout, "  %s\n", c)
			}
			if d.Compatibility != nil {
				fmt.Fprintf(g.stdout, "  %s\n", d.Compatibility)
			}
			return nil
		},
	}
	rf.add(cmd)
	return cmd
}

// NewCmdPromote writes a generation into the config repository.
func NewCmdPromote(g *globals) *cobra.Command {
	var (
		rf                 repoFlags
		genFile, review    string
		rollback, activate bool
		vf                 verifierFlags
	)
	cmd := &cobra.Command{
		Use:   "promote --repo URL --pool P --generation FILE",
		Short: "Add a generation to the config repository and make it the pool's target, in one commit",
		Long: `Promote verifies the generation's image pins against the repository's
policies/verification.yaml (or --policy when the repository has none), adds
pools/<pool>/generations/<id>.yaml (never rewritten), sets the pool's target in
desired.yaml, pins the pool's kustomization images by digest, and commits with
Slipway-Pool, Slipway-Generation and Slipway-Step trailers, retrying on a race with other
writers. A generation older than the pool's newest needs --rollback. --branch NAME
pushes to a new branch for review instead of the tracked branch (--base, default main);
opening the pull request is left to a forge integration.
Exit 0 promoted (or already the target), 1 refused or in conflict, 2 usage or I/O.`,
		Example: `  slipway promote --repo ./config.git --pool agents --generation g1.yaml --activate
  slipway promote --repo https://git.example/config.git --pool agents --generation g2.yaml --branch promote/g2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.repo == "" || rf.pool == "" || genFile == "" {
				return usage(errors.New("--repo, --pool and --generation are required"))
			}
			gen, err := generation.Load(genFile)
			if err != nil {
				return usage(err)
			}
			if gen.Pool != rf.pool {
				return usage(fmt.Errorf("%s is a generation of pool %q, not %q", genFile, gen.Pool, rf.pool))
			}
			pol, err := vf.load()
			if err != nil {
				return err
			}
			res, err := release.Promote(cmd.Context(), release.Promotion{
				Repo: rf.repo, Branch: rf.branch, ReviewBranch: review, Generation: gen,
				Rollback: rollback, Activate: activate, Policy: pol, SkipVerify: vf.skip,
				RepoOptions: rf.options(),
			})
			if errors.Is(err, gitops.ErrNoRepository) {
				return usage(fmt.Errorf("%w; a config repository is made once, with: slipway config init %s --pool %s", err, rf.repo, rf.pool))
			}
			if err != nil {
				return releaseError(err)
			}
			if err := g.ci(promoteStep(res)); err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "%s %s %s -> %s (sequence %d) on %s\n", res.Status, res.Commit, rf.pool, res.Generation, res.Sequence, res.Branch)
			return nil
		},
	}
	rf.addNamed(cmd, "base")
	cmd.Flags().Lookup("base").Usage = "the config repository's tracked branch, read and (without --branch) written"
	cmd.Flags().StringVar(&genFile, "generation", "", "the Generation document")
	cmd.Flags().StringVar(&review, "branch", "", "push the commit to this new branch for review instead of the tracked branch")
	cmd.Flags().BoolVar(&rollback, "rollback", false, "allow a generation older than the pool's newest")
	cmd.Flags().BoolVar(&activate, "activate", false, "make it active at once (only a pool with no active generation)")
	vf.add(cmd)
	return cmd
}

// NewCmdConfig groups config repository verbs.
func NewCmdConfig(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Set up the config repository"}
	cmd.AddCommand(newCmdConfigInit(g))
	return cmd
}

func newCmdConfigInit(g *globals) *cobra.Command {
	var poolName, policyFile, branch string
	cmd := &cobra.Command{
		Use:   "init DIR|URL --pool P [--policy FILE]",
		Short: "Seed a config repository for a pool (a bare repository is created at DIR if absent)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if poolName == "" {
				return usage(errors.New("--pool is required"))
			}
			target := args[0]
			if !strings.Contains(target, "://") {
				if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
					if err := gitops.InitBare(target, branch); err != nil {
						return usage(err)
					}
				}
			}
			var files map[string][]byte
			if policyFile != "" {
				var err error
				if files, err = release.PolicyFiles(policyFile); err != nil {
					return usage(err)
				}
			}
			res, err := release.InitConfig(cmd.Context(), target, branch, poolName, files, gitops.Signature{})
			if err != nil {
				return releaseError(err)
			}
			if g.json() {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "%s %s\n", res.Status, res.Commit)
			for _, f := range res.Changed {
				fmt.Fprintf(g.stdout, "  %s\n", f)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&poolName, "pool", "", "the pool to seed")
	cmd.Flags().StringVar(&policyFile, "policy", "", "store this VerificationPolicy (and its key files) as policies/verification.yaml")
	cmd.Flags().StringVar(&branch, "branch", "main", "the branch")
	return cmd
}
