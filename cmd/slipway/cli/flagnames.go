package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagConcept is one thing several commands take by flag: it has one name in
// every command, older spellings kept as deprecated, hidden aliases for one
// release, and an environment variable that fills the flag when the command
// line does not give it.
type flagConcept struct {
	name   string   // the flag's one name
	was    []string // older spellings, deprecated aliases bound to the same value
	env    string   // fills the flag when neither it nor an alias is given
	oldEnv string   // a deprecated environment variable, read when env is unset
	// unlessGiven: the environment does not fill the flag when the command
	// line gives one of these (the command takes one or the other).
	unlessGiven []string
	what        string // for the deprecation warnings
}

// flagConcepts are docs/cli.md's "one flag name per concept". The runtime's
// URL is --runtime and the control plane's is --control, each named after
// the plane it reaches: --server was the runtime in rollout, runs and claim
// but the control plane in job, and a rollout can reach a cluster
// (--kubeconfig) and a prover as well, so "server" said neither which nor
// whose.
var flagConcepts = []flagConcept{
	{name: "repo", was: []string{"config-repo"}, env: "SLIPWAY_REPO", what: "the config repository"},
	{name: "runtime", was: []string{"server"}, env: "SLIPWAY_RUNTIME", unlessGiven: []string{"kubeconfig", "state"}, what: "the runtime's URL"},
	{name: "control", was: []string{"server"}, env: "SLIPWAY_CONTROL", oldEnv: "SLIPWAY_CONTROL_URL", what: "the control plane's URL"},
	{name: "state", env: "SLIPWAY_STATE", unlessGiven: []string{"runtime"}, what: "the runtime's state directory"},
	{name: "token-file", env: "SLIPWAY_TOKEN_FILE", what: "the API token's file"},
}

// flagRenames are flags of one command renamed because their old name is
// another concept's: control serve's --runtime POOL=URL,TOKEN-FILE is not a
// runtime's URL, job list's --state is not a state directory.
var flagRenames = []struct{ command, name, was string }{
	{"slipway control serve", "pool-runtime", "runtime"},
	{"slipway job list", "status", "state"},
}

// oneNamePerConcept gives every command of the tree the deprecated aliases
// of its concept flags and of flagRenames, and says in each concept flag's
// help which variable fills it. Deprecation warnings go to stderr (cobra
// would print them on stdout, among a command's results).
func oneNamePerConcept(c *cobra.Command, stderr io.Writer) {
	for _, sub := range c.Commands() {
		oneNamePerConcept(sub, stderr)
	}
	fs := c.Flags()
	fs.SetOutput(stderr)
	for _, r := range flagRenames {
		if c.CommandPath() != r.command {
			continue
		}
		f := fs.Lookup(r.name)
		if f == nil {
			panic(fmt.Sprintf("%s has no --%s to rename", r.command, r.name))
		}
		addAlias(fs, f, r.was, "use --"+r.name)
	}
	for _, k := range flagConcepts {
		f := fs.Lookup(k.name)
		if f == nil || f.Deprecated != "" {
			continue
		}
		for _, was := range k.was {
			if fs.Lookup(was) == nil && !ambiguousAlias(fs, k.name, was) {
				addAlias(fs, f, was, "use --"+k.name+" ("+k.what+")")
			}
		}
		if k.env != "" && !strings.Contains(f.Usage, "$"+k.env) {
			f.Usage += " ($" + k.env + ")"
		}
	}
}

// ambiguousAlias says whether was is the old spelling of another concept
// flag fs takes as well as of name's (--server, on a command that takes both
// --runtime and --control): such a command is newer than the old spelling
// and gets no alias, since it could not say which flag was meant.
func ambiguousAlias(fs *pflag.FlagSet, name, was string) bool {
	for _, k := range flagConcepts {
		if k.name != name && slices.Contains(k.was, was) && fs.Lookup(k.name) != nil {
			return true
		}
	}
	return false
}

// addAlias registers was as a hidden, deprecated spelling of f, bound to the
// same value.
func addAlias(fs *pflag.FlagSet, f *pflag.Flag, was, deprecated string) {
	fs.AddFlag(&pflag.Flag{
		Name:        was,
		Usage:       "deprecated: " + deprecated,
		Value:       f.Value,
		DefValue:    f.DefValue,
		NoOptDefVal: f.NoOptDefVal,
		Deprecated:  deprecated,
		Hidden:      true,
	})
}

// conceptsFromEnv runs after parsing: a concept flag given by an old
// spelling counts as given; one not given takes its environment variable.
// Giving a flag under both its names is a usage error.
func conceptsFromEnv(cmd *cobra.Command, getenv func(string) string, stderr io.Writer) error {
	fs := cmd.Flags()
	explicit := map[string]bool{} // on the command line, before any variable fills a flag
	fs.Visit(func(f *pflag.Flag) { explicit[f.Name] = true })
	given := func(name string) bool { return explicit[name] }
	for _, k := range flagConcepts {
		f := fs.Lookup(k.name)
		if f == nil || f.Deprecated != "" {
			continue
		}
		for _, was := range k.was {
			if !given(was) {
				continue
			}
			if f.Changed {
				return usage(fmt.Errorf("--%s and --%s are the same flag (--%s is its old spelling): give --%s once", k.name, was, was, k.name))
			}
			f.Changed = true
		}
		if f.Changed {
			continue
		}
		skip := false
		for _, other := range k.unlessGiven {
			skip = skip || given(other)
		}
		v, from := getenv(k.env), k.env
		if v == "" && k.oldEnv != "" {
			if v, from = getenv(k.oldEnv), k.oldEnv; v != "" && !skip {
				fmt.Fprintf(stderr, "Environment variable $%s has been deprecated, use $%s\n", k.oldEnv, k.env)
			}
		}
		if v == "" || skip {
			continue
		}
		if err := fs.Set(k.name, v); err != nil {
			return usage(fmt.Errorf("$%s: %w", from, err))
		}
	}
	return nil
}
