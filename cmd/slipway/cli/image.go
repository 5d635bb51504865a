package cli

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	sandboxrunner "github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

// NewCmdImage groups image verbs.
func NewCmdImage(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Make images without a daemon"}
	cmd.AddCommand(newCmdImageFromDir(g), newCmdImageRunner(g))
	return cmd
}

type imageResult struct {
	Digest string `json:"digest"`
	Ref    string `json:"ref,omitempty"`
	Layout string `json:"ociLayout,omitempty"`
}

func newCmdImageFromDir(g *globals) *cobra.Command {
	var push, layoutDir, platform string
	var env, labels []string
	cmd := &cobra.Command{
		Use:   "from-dir DIR",
		Short: "Make a reproducible single-layer image of a directory (for example a base rootfs)",
		Example: `  fixtures/base/busybox-rootfs.sh /tmp/base
  slipway image from-dir /tmp/base --push 127.0.0.1:5000/slipway/base`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if push == "" && layoutDir == "" {
				return usage(fmt.Errorf("give --push REPO or --oci-layout DIR"))
			}
			epoch, err := sourceDateEpoch()
			if err != nil {
				return err
			}
			p, err := v1.ParsePlatform(platform)
			if err != nil {
				return usage(fmt.Errorf("--platform: %w", err))
			}
			img, done, err := template.ImageFromDir(cmd.Context(), args[0], epoch, *p, env)
			if err != nil {
				return usage(err)
			}
			defer done()
			if img, err = withLabels(img, labels); err != nil {
				return usage(err)
			}
			d, err := img.Digest()
			if err != nil {
				return failed(err)
			}
			res := imageResult{Digest: d.String()}
			if push != "" {
				popts, pushed := g.pushProgress(push)
				res.Ref, err = template.Push(cmd.Context(), img, push, popts...)
				pushed()
				if err != nil {
					return failed(err)
				}
			}
			if layoutDir != "" {
				if err := template.WriteLayout(layoutDir, img, ""); err != nil {
					return failed(err)
				}
				res.Layout = layoutDir
			}
			if g.json() {
				return g.printJSON(res)
			}
			out := res.Digest
			if res.Ref != "" {
				out = res.Ref
			}
			fmt.Fprintln(g.stdout, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&push, "push", "", "push to this repository, by digest; the tag "+"\"latest\" is not set")
	cmd.Flags().StringVar(&layoutDir, "oci-layout", "", "write to this OCI image layout directory")
	cmd.Flags().StringVar(&platform, "platform", "linux/"+runtime.GOARCH, "the image's os/arch[/variant]")
	cmd.Flags().StringArrayVar(&env, "env", []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, "image environment NAME=VALUE")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "a config label KEY=VALUE (repeatable), as crane mutate --label sets one")
	return cmd
}

// withLabels sets the config labels KEY=VALUE on img.
func withLabels(img v1.Image, labels []string) (v1.Image, error) {
	if len(labels) == 0 {
		return img, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
		}
		cf.Config.Labels[k] = v
	}
	return mutate.ConfigFile(img, cf)
}

func newCmdImageRunner(g *globals) *cobra.Command {
	var push, platform string
	cmd := &cobra.Command{
		Use:   "runner BINARY --push REPO[:TAG]",
		Short: "Make the runner image from a slipway-runner binary (its sha256 in a label) and push it by digest",
		Long: `The runner image holds the binary at /usr/local/bin/slipway-runner and records its sha256 and
protocol version in the labels dev.slipway.runner.sha256 and dev.slipway.runner.protocol, so
that a generation pins the runner apart from the template and the runtime checks that the
process it talks to runs exactly that binary.`,
		Example: `  make build && slipway image runner bin/slipway-runner --push 127.0.0.1:5000/platform/runner:v1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if push == "" {
				return usage(fmt.Errorf("--push REPO is required"))
			}
			epoch, err := sourceDateEpoch()
			if err != nil {
				return err
			}
			p, err := v1.ParsePlatform(platform)
			if err != nil {
				return usage(fmt.Errorf("--platform: %w", err))
			}
			img, done, err := sandbox.RunnerImage(cmd.Context(), args[0], epoch, *p, sandboxrunner.ProtocolVersion)
			if err != nil {
				return usage(err)
			}
			defer done()
			popts, pushed := g.pushProgress(push)
			ref, err := template.Push(cmd.Context(), img, push, popts...)
			pushed()
			if err != nil {
				return failed(err)
			}
			d, _ := img.Digest()
			if g.json() {
				return g.printJSON(imageResult{Digest: d.String(), Ref: ref})
			}
			fmt.Fprintln(g.stdout, ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&push, "push", "", "push to this repository, by digest (and the tag, if given)")
	cmd.Flags().StringVar(&platform, "platform", "linux/"+runtime.GOARCH, "the image's os/arch[/variant]")
	return cmd
}
