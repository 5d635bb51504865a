package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/slipway-dev/slipway/pkg/config/gitops"
	"github.com/slipway-dev/slipway/pkg/console"
	"github.com/slipway-dev/slipway/pkg/release/sign"
)

// NewCmdConsole is the operator console's process.
func NewCmdConsole(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "console", Short: "The operator console: web pages over jobs, runs, pools, generations and rollouts"}
	var control, runtimeURL, tokenFile, repoURL, branch, listen, signKey string
	var unsignedEvidence, readOnly bool
	serve := &cobra.Command{
		Use:   "serve --control URL --runtime URL --token-file FILE --repo URL --listen ADDR",
		Short: "Serve the console: jobs, runs and their lineage, pools, generations, rollouts, live",
		Long: `Serve renders pages from the control plane's API (with the token each user logs in with: a
tenant sees its own jobs, an operator all), the runtime's API (runs, pool status and cleanup records,
read with the runtime token in --token-file, never shown) and the config repository (pools, generations, rollouts).
A job's events and a running rollout's timeline follow live. Actions need an operator token and a
reason: cancelling a job (recorded in its cancellation record), aborting a rollout and rolling a pool
back to a retained generation (recorded as the commit's Slipway-Reason and Slipway-Actor trailers: the
operator's tenant and token id, never the token), and suspending or resuming a run on a runtime that
keeps checkpoints (runtime serve --checkpoint-key; the runtime records the reason and the operator with
the suspend or the restore, and the run page reads them back). A rollback is driven by the console on the runtime,
its proof evidence signed with --sign-key (as rollout rollback does; or --unsigned-evidence); without
either, the console refuses rollbacks and says why. --read-only refuses every action on rollouts.
Assets are embedded: it works offline.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if control == "" || listen == "" {
				return usage(errors.New("--control and --listen are required"))
			}
			var opts []console.Option
			if runtimeURL != "" {
				tok, err := readToken(tokenFile)
				if err != nil {
					return usage(fmt.Errorf("--token-file (the runtime's token): %w", err))
				}
				opts = append(opts, console.WithRuntime("runtime", runtimeURL, tok))
			}
			if repoURL != "" {
				repo, err := gitops.Open(cmd.Context(), repoURL, gitops.WithDepth(0))
				if err != nil {
					return usage(err)
				}
				opts = append(opts, console.WithConfigRepo(repo, branch))
				if !readOnly {
					opts = append(opts, console.WithConfigWriter(func(ctx context.Context) (*gitops.Repo, error) {
						return gitops.Open(ctx, repoURL)
					}, gitops.Signature{}))
				}
			}
			switch {
			case signKey != "" && unsignedEvidence:
				return usage(errors.New("--sign-key and --unsigned-evidence exclude each other"))
			case signKey != "":
				sv, err := sign.LoadSignerRef(cmd.Context(), signKey, keyPassword)
				if err != nil {
					return usage(err)
				}
				opts = append(opts, console.WithEvidenceSigner(sv))
			case unsignedEvidence:
				opts = append(opts, console.WithUnsignedEvidence())
			}
			opts = append(opts, console.WithLogger(slog.New(slog.NewJSONHandler(g.stderr, nil))))
			s, err := console.New(control, opts...)
			if err != nil {
				return usage(err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usage(err)
			}
			defer s.Close()
			srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			fmt.Fprintf(g.stderr, "serving on %s\n", ln.Addr())
			fmt.Fprintf(g.stdout, "console: http://%s/\n", ln.Addr())
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := serve.Flags()
	f.StringVar(&control, "control", "", "the control plane's URL")
	f.StringVar(&runtimeURL, "runtime", "", "the runtime's URL (runs, pool status, cleanup records)")
	f.StringVar(&tokenFile, "token-file", "", "the runtime's token file")
	f.StringVar(&repoURL, "repo", "", "the config repository (pools, generations, rollouts)")
	f.StringVar(&branch, "branch", "main", "its branch")
	f.StringVar(&listen, "listen", "127.0.0.1:7090", "address of the console")
	f.StringVar(&signKey, "sign-key", "", "cosign key (file or KMS URI) that signs a rollback's evidence; password from $"+passwordEnv)
	f.BoolVar(&unsignedEvidence, "unsigned-evidence", false, "commit a rollback's evidence as an unsigned statement (no --sign-key)")
	f.BoolVar(&readOnly, "read-only", false, "refuse aborts and rollbacks (the console never writes to the config repository)")
	cmd.AddCommand(serve)
	return cmd
}
