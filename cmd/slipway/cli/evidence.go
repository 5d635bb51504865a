package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/release/rollout"
)

// NewCmdEvidence groups the verbs on rollout evidence.
func NewCmdEvidence(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Show and verify rollout evidence (pools/<pool>/evidence/<generation>/<rollout>/)",
	}
	cmd.AddCommand(newCmdEvidenceVerify(g), newCmdEvidenceShow(g))
	return cmd
}

// evidenceFlags select evidence in the config repository.
type evidenceFlags struct {
	rf                 repoFlags
	rollout, genID     string
	vf                 verifierFlags
	withPolicyFallback bool
}

func (f *evidenceFlags) add(cmd *cobra.Command) {
	f.rf.add(cmd)
	cmd.Flags().StringVar(&f.rollout, "rollout", "", "one rollout's evidence (its id, ro-…); default every rollout's")
	cmd.Flags().StringVar(&f.genID, "generation", "", "the evidence of rollouts to this generation (g-…)")
	if f.withPolicyFallback {
		cmd.Flags().StringVar(&f.vf.policyFile, "policy", "", "VerificationPolicy whose keys verify, when the repository holds no policies/verification.yaml")
	}
}

// run reads the evidence with fn and hands the report to print.
func (f *evidenceFlags) run(g *globals, fn func(context.Context, *gitops.Repo, rollout.EvidenceQuery) (*rollout.EvidenceReport, error), print func(*rollout.EvidenceReport) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if f.rf.repo == "" || f.rf.pool == "" {
			return usage(errors.New("--repo and --pool are required"))
		}
		pol, err := f.vf.load()
		if err != nil {
			return err
		}
		repo, err := gitops.Open(cmd.Context(), f.rf.repo, f.rf.options()...)
		if err != nil {
			return usage(err)
		}
		rep, err := fn(cmd.Context(), repo, rollout.EvidenceQuery{Pool: f.rf.pool, Branch: f.rf.branch, Generation: f.genID, Rollout: f.rollout, Policy: pol})
		if err != nil {
			return usage(err)
		}
		return print(rep)
	}
}

func newCmdEvidenceVerify(g *globals) *cobra.Command {
	f := evidenceFlags{withPolicyFallback: true}
	cmd := &cobra.Command{
		Use:   "verify --repo URL --pool P [--rollout ID] [--generation G] [--output json]",
		Short: "Check every evidence envelope against the keys of the repository's verification policy",
		Long: `Verify reads each evidence folder under pools/<pool>/evidence/<generation>/<rollout>/ and
checks: the statement is in a DSSE envelope (unsigned evidence is refused); a key of the
repository's policies/verification.yaml signed it; its predicate type is
https://slipway.dev/rollout-evidence/v1; its subject is the folder's generation (name and
sha256); its pool, generation and rollout are the folder's; evidence.json says what the
signed statement says. It prints every check, pass or fail, per envelope.
Exit 0 every envelope verified, 1 any refused, 2 errors (no such evidence, no policy,
an unreadable repository).`,
		Example: `  slipway evidence verify --repo ./config.git --pool agents --rollout ro-…
  slipway evidence verify --repo ./config.git --pool agents --generation g-… --output json`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = f.run(g, rollout.VerifyEvidence, func(rep *rollout.EvidenceReport) error {
		if g.json() {
			if err := g.printJSON(rep); err != nil {
				return err
			}
		} else {
			printVerification(g.stdout, rep)
		}
		if !rep.Verified {
			return silent(exitFailed)
		}
		return nil
	})
	f.add(cmd)
	return cmd
}

func printVerification(w io.Writer, rep *rollout.EvidenceReport) {
	fmt.Fprintf(w, "pool %s at %s, policy %s (%s)\n", rep.Pool, rep.Revision, rep.Policy, rep.PolicyDigest)
	for _, r := range rep.Records {
		verdict := "verified"
		if !r.Verified {
			verdict = "REFUSED: " + r.Reason
		}
		fmt.Fprintf(w, "%s %s: %s\n", r.Generation, r.Rollout, verdict)
		for _, c := range r.Checks {
			fmt.Fprintf(w, "  %-14s %s  %s\n", c.Name, passFail(c.Passed), c.Reason)
		}
	}
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func newCmdEvidenceShow(g *globals) *cobra.Command {
	var f evidenceFlags
	cmd := &cobra.Command{
		Use:   "show --repo URL --pool P [--rollout ID] [--generation G] [--output json]",
		Short: "Print rollout evidence as its statement says it (not verified: see evidence verify)",
		Long: `Show decodes each evidence folder's statement (from the DSSE envelope's payload, or the
bare statement of unsigned evidence): the step it proves, who drove it, the runtime, and each
proof check with its result, reason, sandbox and times. It does not check signatures:
evidence verify does.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = f.run(g, rollout.ReadEvidence, func(rep *rollout.EvidenceReport) error {
		if g.json() {
			return g.printJSON(rep)
		}
		printEvidence(g.stdout, rep)
		return nil
	})
	f.add(cmd)
	return cmd
}

func printEvidence(w io.Writer, rep *rollout.EvidenceReport) {
	fmt.Fprintf(w, "pool %s at %s (not verified: slipway evidence verify)\n", rep.Pool, rep.Revision)
	for _, r := range rep.Records {
		signed := "unsigned"
		if r.Signed {
			signed = "signed (DSSE)"
		}
		fmt.Fprintf(w, "%s %s: %s, %s\n", r.Generation, r.Rollout, signed, orNone(r.File))
		e := r.Evidence
		if e == nil {
			fmt.Fprintf(w, "  %s\n", r.Reason)
			continue
		}
		result := "passed"
		if !e.Passed {
			result = "FAILED"
		}
		fmt.Fprintf(w, "  step      3 (prove): %s\n  driver    %s\n", result, e.Driver)
		if e.SandboxID != "" || e.RunID != "" {
			fmt.Fprintf(w, "  sandbox   %s (run %s)\n", orNone(e.SandboxID), orNone(e.RunID))
		}
		if e.Runtime != nil && e.Runtime.ObservedRevision != "" {
			fmt.Fprintf(w, "  runtime   at %s\n", e.Runtime.ObservedRevision)
		}
		for _, c := range e.Checks {
			fmt.Fprintf(w, "  %-18s %s  %s → %s (%s)  %s\n", c.Check, passFail(c.Passed), c.Started.Format(time.RFC3339), c.Finished.Format(time.RFC3339), c.Finished.Sub(c.Started).Round(time.Millisecond), c.Reason)
		}
	}
}
