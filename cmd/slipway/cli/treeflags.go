package cli

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/pkg/release/pin"
)

// treeFlags choose what counts as an image in a YAML tree.
type treeFlags struct {
	config        string
	maxFileSize   int64
	includeHidden bool
	stdin         io.Reader // read for the path -
}

func (f *treeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "a PinConfig file naming extra image fields of custom resources")
	fs.Int64Var(&f.maxFileSize, "max-file-size", pin.DefaultMaxFileSize, "refuse YAML files larger than this many bytes")
	fs.BoolVar(&f.includeHidden, "include-hidden", false, "walk hidden directories (.github, .argocd) too; .git, .hg and .svn never")
}

// find reads the tree. Every error here is an input error (exit 2), a
// directory with no YAML in it included. What the walk skipped is in the
// tree, for the verb's summary.
func (f *treeFlags) find(ctx context.Context, paths []string) (*pin.Tree, error) {
	opts := []pin.Option{pin.WithMaxFileSize(f.maxFileSize)}
	if f.includeHidden {
		opts = append(opts, pin.WithIncludeHidden())
	}
	if f.config != "" {
		c, err := pin.LoadConfig(f.config)
		if err != nil {
			return nil, usage(err)
		}
		opts = append(opts, pin.WithConfig(c))
	}
	if slices.Contains(paths, "-") {
		if len(paths) > 1 {
			return nil, usage(errors.New("- reads the YAML stream on stdin alone: give no other path with it"))
		}
		tree, err := pin.FindStream(ctx, pin.StdinName, f.stdin, opts...)
		if err != nil {
			return nil, usage(err)
		}
		return tree, nil
	}
	tree, err := pin.Find(ctx, paths, opts...)
	if err != nil {
		return nil, usage(err)
	}
	return tree, nil
}

// stdin reports whether the paths are "-", the stream on stdin.
func stdinPaths(paths []string) bool { return len(paths) == 1 && paths[0] == "-" }
