package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/ref"
)

// NewCmdResolve resolves references to pinned references.
func NewCmdResolve(g *globals) *cobra.Command {
	var rf resolverFlags
	var dropTag bool
	cmd := &cobra.Command{
		Use:   "resolve REF...",
		Short: "Resolve image references to digests, one pinned reference per line",
		Example: `  slipway resolve 127.0.0.1:5000/app:v1
  slipway resolve --platform linux/arm64 --lock images.lock nginx:1.25 busybox:1.36`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			refs := make([]ref.Reference, len(args))
			for i, a := range args {
				r, err := ref.Parse(a)
				if err != nil {
					return usage(err)
				}
				refs[i] = r
			}
			s, err := rf.build()
			if err != nil {
				return err
			}
			pins, err := resolveAll(cmd.Context(), s, refs)
			if err != nil {
				return failed(err)
			}
			if err := s.finish(); err != nil {
				return err
			}
			if g.json() {
				return g.printJSON(pins)
			}
			for _, p := range pins {
				out := p.String()
				if dropTag {
					out = p.DigestRef()
				}
				fmt.Fprintln(g.stdout, out)
			}
			return nil
		},
	}
	rf.add(cmd.Flags())
	cmd.Flags().BoolVar(&dropTag, "drop-tag", false, "print repo@digest without the tag")
	return cmd
}

// resolveAll resolves every reference concurrently (the session's resolver
// bounds the look-ups per registry) and reports every failure, not only the first.
func resolveAll(ctx context.Context, s *session, refs []ref.Reference) ([]ref.Pin, error) {
	pins := make([]ref.Pin, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, r := range refs {
		wg.Go(func() { pins[i], errs[i] = s.resolver.Resolve(ctx, r) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return pins, nil
}
