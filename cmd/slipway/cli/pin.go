package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/pin"
)

type pinReport struct {
	Write   bool             `json:"write"`
	Files   []pin.FileResult `json:"files"`
	Pins    []ref.Pin        `json:"pins"`
	Summary pin.Summary      `json:"summary"`
	Skipped []pin.Skipped    `json:"skipped,omitempty"`
	NotYAML map[string]int   `json:"notYAML,omitempty"`
	Lock    string           `json:"lock,omitempty"`
}

// NewCmdPin rewrites image references in YAML trees to digests.
func NewCmdPin(g *globals) *cobra.Command {
	var (
		rf             resolverFlags
		tf             treeFlags
		write, dropTag bool
		refresh        bool
	)
	cmd := &cobra.Command{
		Use:   "pin PATH... | -",
		Short: "Pin every image reference in YAML trees to its digest",
		Long: `Pin finds image references in Kubernetes and kustomize YAML as lint does (pod specs and
image fields of kinds known by name, v1/List items, kustomization images, any pod spec
shape, image-like fields, and custom fields from --config) and rewrites them as
repo:tag@sha256:..., keeping comments, key order and layout. An image that a
kustomization's images entry renames (image: runner, name: runner) is a placeholder: the
entry is pinned, the placeholder is never resolved. Template placeholders (${X}, {{ }},
$(params.x)) and what --config excludes are left as written, and named.

Without --write it prints what would change and writes nothing but the lock.
Files are written only after every reference resolved; one failure writes nothing.

The path - reads one YAML stream from stdin and prints it pinned on stdout, whatever
--write says (kustomize build | slipway pin - | kubectl apply -f -); what changed and the
summary go to stderr.`,
		Example: `  slipway pin deploy/
  slipway pin --write --lock images.lock deploy/
  slipway pin --write --hermetic --lock images.lock deploy/
  kustomize build overlays/prod | slipway pin --lock images.lock - | kubectl apply -f -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := rf.build()
			if err != nil {
				return err
			}
			stream := stdinPaths(args)
			if stream && g.json() {
				return usage(errors.New("pin -: the pinned stream goes to stdout, so -o " + g.output + " cannot: give a file or directory for a report"))
			}
			tf.stdin = g.stdin
			tree, err := tf.find(ctx, args)
			if err != nil {
				return err
			}
			var opts []pin.PlanOption
			if dropTag {
				opts = append(opts, pin.WithDropTag())
			}
			if refresh {
				opts = append(opts, pin.WithRefresh())
			}
			if g.progress != nil {
				opts = append(opts, pin.WithProgress(func(p pin.Progress) {
					g.progress.Statusf("pin: %d of %d references resolved%s", p.Resolved, p.Total, lastOf(p.Last))
				}))
			}
			res, err := pin.Plan(ctx, tree, s.resolver, opts...)
			g.progress.Clear()
			if err != nil {
				return failed(fmt.Errorf("nothing written: %w", err))
			}
			if err := s.finish(); err != nil {
				return err
			}
			if stream {
				if _, err := g.stdout.Write(res.Files[0].Data); err != nil {
					return usage(err)
				}
			} else if write {
				if err := res.Write(); err != nil {
					return usage(err)
				}
			}
			cov := newCoverage(tree)
			report := pinReport{Write: write, Files: res.Files, Pins: res.Pins, Summary: cov.sum, Skipped: tree.Skipped, NotYAML: tree.NotYAML, Lock: rf.lockFile}
			if err := g.ci(pinStep(report, len(res.Changes()))); err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(report)
			}
			changed, changes := 0, g.stdout
			if stream {
				changes = g.stderr // stdout is the stream
			}
			for _, f := range res.Files {
				if f.Status == pin.Changed {
					changed++
				}
				for _, c := range f.Changes {
					fmt.Fprintf(changes, "%s: %s -> %s\n", c.Pos(), c.From, c.To)
				}
			}
			var first string
			switch n := len(res.Changes()); {
			case cov.sum.References == 0:
				first = "nothing to change: no image references found"
			case n == 0 && cov.sum.Placeholders == 0:
				first = "nothing to change: all " + plural(cov.sum.Pinned, "reference", "references") + " pinned by digest"
			case n == 0:
				first = "nothing to change: " + plural(cov.sum.Pinned, "reference", "references") + " pinned by digest"
			case stream:
				first = fmt.Sprintf("pinned %d references in %s", n, pin.StdinName)
			case write:
				first = fmt.Sprintf("pinned %d references in %d files", n, changed)
			default:
				first = fmt.Sprintf("would pin %d references in %d files (dry run: add --write)", n, changed)
			}
			cov.printPin(g.stderr, first)
			return nil
		},
	}
	rf.add(cmd.Flags())
	tf.add(cmd.Flags())
	cmd.Flags().BoolVarP(&write, "write", "w", false, "rewrite the files in place")
	cmd.Flags().BoolVar(&dropTag, "drop-tag", false, "write repo@digest, dropping the tag")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "re-resolve references that already carry a digest by their tag")
	return cmd
}

func lastOf(ref string) string {
	if ref == "" {
		return ""
	}
	return " (last: " + ref + ")"
}
