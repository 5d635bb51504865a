// Package cli is the slipway command line: one NewCmdX per verb, flags and
// environment variables only, no logic of its own.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	exitOK     = 0
	exitFailed = 1 // the command ran and the answer is no (findings, refusals, failures)
	exitUsage  = 2 // usage, input or I/O errors
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func failed(err error) error { return &exitError{code: exitFailed, err: err} }
func usage(err error) error  { return &exitError{code: exitUsage, err: err} }

// silent is an exit code with nothing more to say (the command already printed why).
func silent(code int) error { return &exitError{code: code} }

// globals are the flags every command shares.
type globals struct {
	output string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	cif    ciFlags
}

func (g *globals) json() bool { return g.output == "json" }

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewCmdRoot returns the root command.
func NewCmdRoot(g *globals) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "slipway",
		Short: "Release agent-sandbox software through GitOps, with provenance",
		Long: `Slipway pins, builds, signs and promotes the software of an agent-sandbox platform.

Tags are names, digests are identities: slipway resolves every image reference
to a digest, keeps lock files, and refuses mutable references.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{annotationHelpOnly: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				return printVersion(g)
			}
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch g.output {
			case "text", "json":
			default:
				return usage(fmt.Errorf("--output must be text or json, got %q", g.output))
			}
			return g.cif.setup(os.Getenv, g)
		},
	}
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	g.cif.add(root.PersistentFlags())
	root.Flags().BoolVar(&showVersion, "version", false, "print the version, as 'slipway version' does")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	root.AddCommand(
		NewCmdVersion(g),
		NewCmdResolve(g),
		NewCmdPin(g),
		NewCmdLint(g),
		NewCmdTemplate(g),
		NewCmdImage(g),
		NewCmdKeys(g),
		NewCmdSign(g),
		NewCmdAttest(g),
		NewCmdVerify(g),
		NewCmdGeneration(g),
		NewCmdPromote(g),
		NewCmdConfig(g),
		NewCmdRuns(g),
		NewCmdPool(g),
		NewCmdRollout(g),
		NewCmdEvidence(g),
		NewCmdGC(g),
		NewCmdRuntime(g),
		NewCmdClaim(g),
		NewCmdRender(g),
		NewCmdApply(g),
		NewCmdArgoCD(g),
		NewCmdControl(g),
		NewCmdTenant(g),
		NewCmdJob(g),
		NewCmdCanary(g),
		NewCmdIncidents(g),
		NewCmdCleanup(g),
		NewCmdCost(g),
	)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictSubcommands(root)
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := NewCmdRoot(g)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "slipway: %v\n", err)
	if cmd != nil {
		g.ciError(strings.TrimPrefix(cmd.CommandPath(), "slipway "), err)
	}
	return code
}
