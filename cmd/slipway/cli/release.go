package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	sandboxrunner "github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"

	"github.com/slipway-dev/slipway/pkg/release/selfrelease"
	"github.com/slipway-dev/slipway/pkg/release/sign"
	"github.com/slipway-dev/slipway/pkg/rootfs"
)

// NewCmdRelease releases Slipway itself.
func NewCmdRelease(g *globals) *cobra.Command {
	var o selfrelease.Options
	var sf signFlags
	var push, from string
	cmd := &cobra.Command{
		Use:   "release [--version vX.Y.Z] --sign-key KEY --offline-no-tlog [--push REGISTRY] [--snapshot] | --from DIR --push REGISTRY --sign-key KEY",
		Short: "Release Slipway itself: reproducible binaries, checksums, SBOMs, provenance, signed images",
		Long: `Release builds slipway, slipway-cmp and slipway-runner from the git tree in the current folder
(the module's root) for linux/amd64 and linux/arm64 with -trimpath, CGO_ENABLED=0, -buildvcs=false
and -ldflags "-s -w -buildid=" stamping the version, commit and dirty flag, into --out as
PROGRAM-OS-ARCH. It writes checksums.txt (GoReleaser's format) and its signature checksums.txt.sig
(cosign sign-blob's), an SPDX SBOM per binary, SLSA v1 provenance naming the commit, the Go
version and the builder (signed as a DSSE envelope), a verification policy naming that builder,
and an OCI image of each program (empty base, static binary, no daemon) as a multi-platform index
in the OCI layout --out/oci. With --push REGISTRY[/PATH] the indexes are pushed by digest, signed
and attested (provenance, SBOM), the release's files are pushed as one OCI artifact (artifactType
application/vnd.slipway.release.files.v1, a layer per file titled with its name) to
REGISTRY/slipway-release by digest, and all are tagged with the version last, so a refused push
leaves no tag.

It refuses a dirty tree (naming the files) or a commit without the release tag unless --snapshot,
which builds v0.0.0-<commit12>[-dirty]. Times come from the commit, so two releases of one commit
are byte-identical. With --from DIR it builds nothing: it publishes the images of the release an
earlier run wrote to DIR (its OCI layout and the statements kept beside it) to --push, signed and
attested, tags last. Exit 0 released, 1 refused or failed, 2 usage errors.`,
		Example: `  COSIGN_PASSWORD=... slipway release --version v0.5.0 --sign-key release.key --offline-no-tlog --push ghcr.io/slipway-dev
  slipway release --snapshot --out dist --platform linux/amd64
  COSIGN_PASSWORD=... slipway release --from dist --push 127.0.0.1:5000/slipway-dev --sign-key demo.key --offline-no-tlog`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.key != "" || !o.Snapshot {
				if _, err := sf.options("sign-key"); err != nil {
					return err
				}
				sv, err := sign.LoadSignerRef(cmd.Context(), sf.key, keyPassword)
				if err != nil {
					return usage(err)
				}
				o.Signer = sv
			}
			if push != "" {
				o.Push, o.Repository = true, push
			}
			if g.json() {
				o.Log = g.stderr
			} else {
				o.Log = g.stdout
			}
			if from != "" {
				if push == "" || o.Signer == nil {
					return usage(errors.New("--from publishes a built release: give --push and --sign-key"))
				}
				res, err := selfrelease.Publish(cmd.Context(), from, selfrelease.PublishOptions{Repository: push, Signer: o.Signer, Log: o.Log})
				if err != nil {
					return failed(err)
				}
				if g.json() {
					return g.printJSON(res)
				}
				printRelease(g, res)
				return nil
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			o.Dir = wd
			o.RunnerImage = func(ctx context.Context, bin string, epoch time.Time, p v1.Platform, opts ...rootfs.LayerOption) (v1.Image, func() error, error) {
				return sandbox.RunnerImage(ctx, bin, epoch, p, sandboxrunner.ProtocolVersion, opts...)
			}
			res, err := selfrelease.Release(cmd.Context(), o)
			if err != nil {
				return failed(err)
			}
			if g.json() {
				return g.printJSON(res)
			}
			printRelease(g, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Out, "out", "dist", "output folder (must be empty or absent)")
	cmd.Flags().StringVar(&o.Version, "version", "", "the release version, the tag at HEAD (default: that tag)")
	cmd.Flags().BoolVar(&o.Snapshot, "snapshot", false, "build a dirty or untagged tree as v0.0.0-<commit12>[-dirty] (never a release)")
	cmd.Flags().StringSliceVar(&o.Platforms, "platform", selfrelease.Platforms, "os/arch to build for")
	cmd.Flags().StringVar(&from, "from", "", "publish the release built earlier in this folder (with --push and --sign-key) instead of building one")
	cmd.Flags().StringVar(&push, "push", "", "registry[/path] to push the images to (as REGISTRY/PROGRAM), by digest, then tag")
	cmd.Flags().StringVar(&o.Repository, "repository", selfrelease.DefaultRepository, "where the images are published, for the policy and labels (--push sets it)")
	sf.add(cmd.Flags(), "sign-key")
	return cmd
}

func printRelease(g *globals, r *selfrelease.Result) {
	kind := "release"
	if r.Snapshot {
		kind = "snapshot"
	}
	fmt.Fprintf(g.stdout, "%s %s of commit %s (dirty %t), %s, builder %s, epoch %d\n", kind, r.Version, r.Commit, r.Dirty, r.GoVersion, r.BuilderID, r.Epoch)
	for _, b := range r.Binaries {
		fmt.Fprintf(g.stdout, "  %s  %s  %d bytes  %s\n", b.SHA256, b.File, b.Size, b.SBOM)
	}
	for _, im := range r.Images {
		fmt.Fprintf(g.stdout, "  image %s %s", im.Program, im.Digest)
		if im.Tag != "" {
			fmt.Fprintf(g.stdout, " pushed %s, tagged %s", im.Ref, im.Tag)
		}
		fmt.Fprintln(g.stdout)
		for _, p := range slices.Sorted(maps.Keys(im.Platforms)) {
			fmt.Fprintf(g.stdout, "    %s %s\n", p, im.Platforms[p])
		}
	}
	if r.Files != nil {
		fmt.Fprintf(g.stdout, "  files %s (%d files, %s), tagged %s\n", r.Files.Ref, r.Files.Files, r.Files.ArtifactType, r.Files.Tag)
	}
	for _, f := range []string{r.Checksums, r.Signature, r.Provenance, r.Policy, r.Layout} {
		if f != "" {
			fmt.Fprintf(g.stdout, "  %s\n", filepath.Join(r.Out, f))
		}
	}
	s := r.Seconds
	fmt.Fprintf(g.stdout, "seconds: build %.1f, sbom %.1f, images %.1f (assembly %.1f beside the builds), push %.1f, total %.1f\n", s.Build, s.SBOM, s.Images, s.ImageWork, s.Push, s.Total)
}

// NewCmdVerifyBlob checks a file's signature, as cosign verify-blob does.
func NewCmdVerifyBlob(g *globals) *cobra.Command {
	var key, sig, file string
	cmd := &cobra.Command{
		Use:   "verify-blob FILE --key PUB --signature SIG [--file DOWNLOAD]",
		Short: "Verify a file's signature with a public key (cosign verify-blob --key semantics, no transparency log)",
		Long: `Verify-blob checks SIG (base64, as cosign sign-blob and slipway release write it) over FILE with the
public key PUB, as "cosign verify-blob --key PUB --signature SIG --insecure-ignore-tlog FILE" does.
With --file, FILE is a release's checksums.txt, and DOWNLOAD's sha256 must also be the one it lists
under DOWNLOAD's name: what an install checks before it runs a downloaded binary.
Exit 0 verified, 1 refused, 2 usage or I/O errors.`,
		Example: `  slipway verify-blob checksums.txt --key slipway-release.pub --signature checksums.txt.sig --file slipway-linux-amd64`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" || sig == "" {
				return usage(errors.New("--key and --signature are required"))
			}
			v, err := sign.LoadVerifierRef(cmd.Context(), key)
			if err != nil {
				return usage(err)
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return usage(err)
			}
			s, err := os.ReadFile(sig)
			if err != nil {
				return usage(err)
			}
			if file == "" {
				err = sign.VerifyBlob(v, data, s)
			} else {
				var dl []byte
				if dl, err = os.ReadFile(file); err != nil {
					return usage(err)
				}
				err = selfrelease.VerifyDownload(v, data, s, filepath.Base(file), dl)
			}
			if err != nil {
				fmt.Fprintln(g.stderr, "slipway verify-blob:", err)
				return silent(exitFailed)
			}
			fmt.Fprintln(g.stdout, "Verified OK")
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "public key file (PEM) or KMS key URI")
	cmd.Flags().StringVar(&sig, "signature", "", "signature file (base64)")
	cmd.Flags().StringVar(&file, "file", "", "a downloaded file whose sha256 FILE (a checksums.txt) must list")
	return cmd
}
