package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/resolve"
	"github.com/slipway-dev/slipway/pkg/release/scan"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

// NewCmdTemplate groups the workspace-template verbs.
func NewCmdTemplate(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Build, scan and freeze workspace templates as release artifacts",
	}
	cmd.AddCommand(newCmdTemplateBuild(g), newCmdTemplateScan(g))
	return cmd
}

// sourceDateEpoch reads SOURCE_DATE_EPOCH (the reproducible-builds convention); unset means the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, usage(fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a non-negative number of seconds", v))
	}
	return time.Unix(n, 0).UTC(), nil
}

func parseAllows(specs []string) ([]scan.Allow, error) {
	var out []scan.Allow
	for _, s := range specs {
		a, err := scan.ParseAllow(s)
		if err != nil {
			return nil, usage(fmt.Errorf("--allow %q: %w", s, err))
		}
		out = append(out, a)
	}
	return out, nil
}

func newCmdTemplateBuild(g *globals) *cobra.Command {
	var (
		push, layoutDir, sbomDir string
		resolveBase, keep        bool
		allows                   []string
		verbose                  bool
		sf                       signFlags
		builderID                string
	)
	cmd := &cobra.Command{
		Use:   "build FILE",
		Short: "Build a template: base by digest, steps in a sandbox, scrub, scan, freeze, test, publish (prints JSON)",
		Long: `Build runs the spec's steps in an isolated build sandbox on its base image, removes
build credentials and transient files, refuses to freeze on any secret or hygiene finding,
freezes the change into a reproducible layer (SOURCE_DATE_EPOCH clamps timestamps), runs the
smoke tests in a fresh sandbox of the frozen tree, writes SPDX and CycloneDX SBOMs, and
publishes the image by digest. With --sign-key it then signs the digest and attaches its
SLSA v1 provenance and both SBOMs as attestations, each verified after writing.
It prints a JSON result.`,
		Example: `  slipway template build templates/minimal/template.yaml --push 127.0.0.1:5000/templates/minimal
  slipway template build templates/minimal/template.yaml --oci-layout out/ --resolve-base
  COSIGN_PASSWORD=... slipway template build templates/minimal/template.yaml --push 127.0.0.1:5000/templates/minimal \
      --sign-key cosign.key --offline-no-tlog --builder-id https://ci.example/builders/templates`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			epoch, err := sourceDateEpoch()
			if err != nil {
				return err
			}
			al, err := parseAllows(allows)
			if err != nil {
				return err
			}
			opts := []template.Option{template.WithEpoch(epoch), template.WithAllow(al...)}
			switch {
			case verbose:
				opts = append(opts, template.WithLog(g.progress.Wrap(g.stderr)))
			case g.progress != nil:
				opts = append(opts, template.WithLog(g.progress.LineWriter("template build: ")))
			}
			if resolveBase {
				reg, err := resolve.NewRegistry()
				if err != nil {
					return usage(err)
				}
				opts = append(opts, template.WithResolveBase(reg))
			}
			var signing *release.Signing
			if sf.key != "" {
				sopts, err := sf.options("sign-key")
				if err != nil {
					return err
				}
				if push == "" {
					return usage(errors.New("--sign-key needs --push: signatures and attestations live in the registry"))
				}
				if builderID == "" {
					return usage(errors.New("--sign-key needs a builder id: --builder-id or $SLIPWAY_BUILDER_ID (the provenance's runDetails.builder.id)"))
				}
				sv, err := sign.LoadSignerRef(cmd.Context(), sf.key, keyPassword)
				if err != nil {
					return usage(err)
				}
				signing = &release.Signing{Signer: sv, BuilderID: builderID, Options: sopts}
			}
			var popts []remote.Option
			pushed := func() {}
			if push != "" {
				popts, pushed = g.pushProgress(push)
			}
			res, err := release.BuildTemplate(cmd.Context(), args[0], release.TemplateOptions{
				Remote:    popts,
				Build:     opts,
				Push:      push,
				OCILayout: layoutDir,
				SBOMDir:   sbomDir,
				Keep:      keep,
				Sign:      signing,
			})
			pushed()
			g.progress.Clear()
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, template.ErrSpec) {
				return usage(err) // no such input file, or a spec that does not parse: an input error, as in every verb
			}
			if err != nil {
				return failed(err)
			}
			if err := g.ci(templateStep(res)); err != nil {
				return err
			}
			// JSON by default; --output text prints one line.
			if cmd.Flags().Changed("output") && !g.json() {
				fmt.Fprintf(g.stdout, "%s %s %s\n", res.Name, res.TemplateID, res.ContentID)
				return nil
			}
			return g.printJSON(res)
		},
	}
	cmd.Flags().StringVar(&push, "push", "", "push the frozen image to this repository, by digest")
	cmd.Flags().StringVar(&layoutDir, "oci-layout", "", "write the frozen image to this OCI image layout directory")
	cmd.Flags().StringVar(&sbomDir, "sbom-dir", "", "where the SBOMs go (default: beside --oci-layout, or the spec's folder/out)")
	cmd.Flags().BoolVar(&resolveBase, "resolve-base", false, "accept a base given by tag: resolve it and record the pin")
	cmd.Flags().StringArrayVar(&allows, "allow", nil, "exempt scan findings: RULE:PATH-GLOB (recorded in the result)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the build's working directory")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log each build phase to stderr")
	sf.add(cmd.Flags(), "sign-key")
	cmd.Flags().StringVar(&builderID, "builder-id", os.Getenv("SLIPWAY_BUILDER_ID"), "the provenance's builder id (default $SLIPWAY_BUILDER_ID)")
	return cmd
}

func newCmdTemplateScan(g *globals) *cobra.Command {
	var allows []string
	cmd := &cobra.Command{
		Use:   "scan IMAGE|DIR",
		Short: "Scan an image (by reference) or an unpacked rootfs for secrets and hygiene problems",
		Long: `Scan runs the template build's security scan alone: private keys, cloud and forge tokens,
docker config auths, passwords in URLs, high-entropy secrets in config files, setuid/setgid
files outside the allow-list, world-writable directories without the sticky bit, leftover
host keys and machine-id. Findings name path, line and rule, never the value.
Exit 0 clean, 1 findings, 2 usage or I/O errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			al, err := parseAllows(allows)
			if err != nil {
				return err
			}
			report, err := release.ScanTarget(cmd.Context(), args[0], al)
			if err != nil {
				return usage(err)
			}
			if g.json() {
				if err := g.printJSON(report); err != nil {
					return err
				}
			} else {
				for _, f := range report.Findings {
					fmt.Fprintln(g.stdout, f)
				}
				for _, f := range report.Allowed {
					fmt.Fprintf(g.stderr, "allowed: %s\n", f)
				}
			}
			if len(report.Findings) > 0 {
				return silent(exitFailed)
			}
			if !g.json() {
				fmt.Fprintf(g.stderr, "clean: %d files, %d directories scanned\n", report.Files, report.Dirs)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&allows, "allow", nil, "exempt findings: RULE:PATH-GLOB")
	return cmd
}
