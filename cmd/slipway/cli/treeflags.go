package cli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/pkg/release/pin"
)

// treeFlags choose what counts as an image in a YAML tree.
type treeFlags struct {
	config      string
	maxFileSize int64
}

func (f *treeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "a PinConfig file naming extra image fields of custom resources")
	fs.Int64Var(&f.maxFileSize, "max-file-size", pin.DefaultMaxFileSize, "refuse YAML files larger than this many bytes")
}

// find reads the tree. Every error here is an input error (exit 2).
func (f *treeFlags) find(ctx context.Context, g *globals, paths []string) (*pin.Tree, error) {
	opts := []pin.Option{pin.WithMaxFileSize(f.maxFileSize)}
	if f.config != "" {
		c, err := pin.LoadConfig(f.config)
		if err != nil {
			return nil, usage(err)
		}
		opts = append(opts, pin.WithConfig(c))
	}
	tree, err := pin.Find(ctx, paths, opts...)
	if err != nil {
		return nil, usage(err)
	}
	if !g.json() {
		for _, s := range tree.Skipped {
			fmt.Fprintf(g.stderr, "skipped %s\n", s)
		}
	}
	return tree, nil
}
