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
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/progress"
)

// startProgress decides from --progress whether long work shows its
// progress on stderr.
func (g *globals) startProgress(getenv func(string) string) error {
	on, err := progress.Enabled(g.progressMode, g.stderr, g.json(), getenv)
	if err != nil {
		return usage(err)
	}
	if on {
		g.progress = progress.New(g.stderr, progress.IsTerminal(g.stderr))
	}
	return nil
}

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
	docs   int // YAML documents printed so far: the second and later are preceded by ---
	// progressMode is --progress; progress shows long work on stderr (nil
	// when it is not shown).
	progressMode string
	progress     *progress.Printer
}

// Output formats of the global -o/--output flag.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// json reports whether the output is structured (-o json or -o yaml): the
// command prints its value through printJSON, which renders it in the format
// asked for.
func (g *globals) json() bool { return g.output == outputJSON || g.output == outputYAML }

// printJSON prints v as indented JSON or, under -o yaml, as the same value in
// YAML (a stream of values as YAML documents separated by ---).
func (g *globals) printJSON(v any) error {
	if g.output == outputYAML {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		if g.docs > 0 {
			if _, err := io.WriteString(g.stdout, "---\n"); err != nil {
				return err
			}
		}
		g.docs++
		_, err = g.stdout.Write(y)
		return err
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// checkOutput validates -o. On a command that writes a file named by
// --out-file, a value that is no format is the file --output used to name
// there (generation create before --out-file): kept for one release, with a
// deprecation warning.
func (g *globals) checkOutput(cmd *cobra.Command) error {
	switch g.output {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	if f := cmd.Flags().Lookup(flagOutFile); f != nil && !f.Changed && g.output != "" {
		fmt.Fprintf(g.stderr, "Flag --output FILE has been deprecated, use --%s FILE (--output is the output format: text, json or yaml)\n", flagOutFile)
		if err := cmd.Flags().Set(flagOutFile, g.output); err != nil {
			return usage(err)
		}
		g.output = outputText
		return nil
	}
	return usage(fmt.Errorf("--output must be text, json or yaml, got %q", g.output))
}

// flagOutFile names the file a command writes, where --output would be the
// format.
const flagOutFile = "out-file"

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
			if err := g.checkOutput(cmd); err != nil {
				return err
			}
			if err := conceptsFromEnv(cmd, os.Getenv, g.stderr); err != nil {
				return err
			}
			if err := g.startProgress(os.Getenv); err != nil {
				return err
			}
			return g.cif.setup(os.Getenv, g)
		},
	}
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().StringVarP(&g.output, "output", "o", outputText, "output format: text, json or yaml")
	g.cif.add(root.PersistentFlags())
	root.PersistentFlags().StringVar(&g.progressMode, "progress", progress.Auto, "show the progress of long work on stderr: auto (on a terminal, without -o json or yaml, not under CI=true), always or never")
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
		NewCmdVerifyBlob(g),
		NewCmdRelease(g),
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
		NewCmdCheckpoint(g),
		NewCmdRender(g),
		NewCmdApply(g),
		NewCmdArgoCD(g),
		NewCmdControl(g),
		NewCmdConsole(g),
		NewCmdTenant(g),
		NewCmdJob(g),
		NewCmdCanary(g),
		NewCmdIncidents(g),
		NewCmdCleanup(g),
		NewCmdCost(g),
	)
	groupCommands(root)
	root.InitDefaultHelpCmd()
	strictHelp(root)
	root.InitDefaultCompletionCmd()
	strictSubcommands(root)
	oneNamePerConcept(root, g.stderr)
	addExamples(root)
	addCompletions(root)
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
	g.progress.Close()
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
	if g.output == outputJSON || outputFromArgs(args) == outputJSON {
		b, _ := json.Marshal(struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
		}{err.Error(), code})
		fmt.Fprintf(stderr, "%s\n", b)
	} else {
		fmt.Fprintf(stderr, "slipway: %v\n", err)
	}
	if cmd != nil {
		g.ciError(strings.TrimPrefix(cmd.CommandPath(), "slipway "), err)
	}
	return code
}

// outputFromArgs is the -o/--output the arguments ask for, read without
// cobra: an error in parsing may stop before the flag is reached, and under
// -o json even that error is printed as JSON.
func outputFromArgs(args []string) string {
	out := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out
		case (a == "-o" || a == "--output") && i+1 < len(args):
			out = args[i+1]
			i++
		case strings.HasPrefix(a, "--output="):
			out = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			out = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	return out
}
