package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/ref"
	"github.com/slipway-dev/slipway/pkg/release/pin"
)

type pinReport struct {
	Write   bool             `json:"write"`
	Files   []pin.FileResult `json:"files"`
	Pins    []ref.Pin        `json:"pins"`
	Skipped []pin.Skipped    `json:"skipped,omitempty"`
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
		Use:   "pin PATH...",
		Short: "Pin every image reference in YAML trees to its digest",
		Long: `Pin finds image references in Kubernetes and kustomize YAML (pod specs of every workload
kind, v1/List items, kustomization images, and custom fields from --config) and rewrites
them as repo:tag@sha256:..., keeping comments, key order and layout. An image that a
kustomization's images entry renames (image: runner, name: runner) is a placeholder: the
entry is pinned, the placeholder is never resolved.

Without --write it prints what would change and writes nothing but the lock.
Files are written only after every reference resolved; one failure writes nothing.`,
		Example: `  slipway pin deploy/
  slipway pin --write --lock images.lock deploy/
  slipway pin --write --hermetic --lock images.lock deploy/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := rf.build()
			if err != nil {
				return err
			}
			tree, err := tf.find(ctx, g, args)
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
			res, err := pin.Plan(ctx, tree, s.resolver, opts...)
			if err != nil {
				return failed(fmt.Errorf("nothing written: %w", err))
			}
			if err := s.finish(); err != nil {
				return err
			}
			if write {
				if err := res.Write(); err != nil {
					return usage(err)
				}
			}
			report := pinReport{Write: write, Files: res.Files, Pins: res.Pins, Skipped: tree.Skipped, Lock: rf.lockFile}
			if err := g.ci(pinStep(report, len(res.Changes()))); err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(report)
			}
			changed := 0
			for _, f := range res.Files {
				if f.Status == pin.Changed {
					changed++
				}
				for _, c := range f.Changes {
					fmt.Fprintf(g.stdout, "%s: %s -> %s\n", c.Pos(), c.From, c.To)
				}
			}
			n := len(res.Changes())
			switch {
			case n == 0:
				ph := len(tree.Placeholders())
				fmt.Fprintf(g.stderr, "%d references in %d files: all pinned, nothing to change%s\n", len(tree.Sites())-ph, len(res.Files), placeholderNote(ph))
			case write:
				fmt.Fprintf(g.stderr, "pinned %d references in %d files\n", n, changed)
			default:
				fmt.Fprintf(g.stderr, "would pin %d references in %d files (dry run: add --write)\n", n, changed)
			}
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

// placeholderNote says how many kustomize placeholders were left to the
// images entries that rename them, if any.
func placeholderNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d kustomize placeholders, left to the images entries that rename them)", n)
}
