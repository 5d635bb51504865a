package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/release/pin"
)

type lintReport struct {
	Findings []pin.Finding  `json:"findings"`
	Summary  pin.Summary    `json:"summary"`
	Skipped  []pin.Skipped  `json:"skipped,omitempty"`
	NotYAML  map[string]int `json:"notYAML,omitempty"`
}

// NewCmdLint reports mutable image references.
func NewCmdLint(g *globals) *cobra.Command {
	var tf treeFlags
	cmd := &cobra.Command{
		Use:   "lint PATH... | -",
		Short: "Report every mutable image reference (exit 1 on findings, 0 clean, 2 on errors)",
		Long: `Lint prints one line per mutable image reference: path:line:col: <ref>: <reason>.
Tag-only references are mutable; imagePullPolicy: Always does not fix that, it only asks
for the tag again, which may return different bytes.

References are found in the pod specs and image fields of kinds known by name (workloads,
agent-sandbox, Argo, Tekton, Knative, KEDA, Ray, Kubeflow, Flink, Spark…), in any
containers, initContainers or ephemeralContainers list of any document (a pod spec shape),
in any other string field named image that parses as a reference ("image-like field not
pinned"), and in the fields a --config PinConfig names; its exclude entries leave sites
alone. Placeholders (${X}, {{ }}, $(params.x), __X__) are reported as such.

A summary on stderr counts the references by how they were found and says what was
skipped: hidden directories (--include-hidden walks them), files not YAML, templates that
do not parse. A directory with no YAML to read is an error (exit 2), and so is a file
named explicitly whose documents are all plain strings (a text file).

The path - reads one YAML stream from stdin (kustomize build | slipway lint -); findings
name it <stdin>, with its line numbers.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tf.stdin = g.stdin
			tree, err := tf.find(cmd.Context(), args)
			if err != nil {
				return err
			}
			findings := pin.Lint(tree)
			if err := g.ci(lintStep(findings)); err != nil {
				return err
			}
			cov := newCoverage(tree)
			if g.json() {
				if findings == nil {
					findings = []pin.Finding{}
				}
				if err := g.printJSON(lintReport{Findings: findings, Summary: cov.sum, Skipped: tree.Skipped, NotYAML: tree.NotYAML}); err != nil {
					return err
				}
			} else {
				for _, f := range findings {
					fmt.Fprintln(g.stdout, f)
				}
				cov.printLint(g.stderr)
			}
			if len(findings) > 0 {
				return silent(exitFailed)
			}
			return nil
		},
	}
	tf.add(cmd.Flags())
	return cmd
}
