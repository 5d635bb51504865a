package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// conceptsByCommand is every command that takes one of flagConcepts, with
// the concepts it takes. A command that gains or loses one must be entered
// here, so the one-name rule is checked where it is new.
var conceptsByCommand = map[string][]string{
	"slipway apply":                  {"repo"},
	"slipway argocd generator serve": {"repo", "token-file"},
	"slipway canary":                 {"runtime", "token-file"},
	"slipway claim":                  {"runtime", "token-file"},
	"slipway checkpoint create":      {"runtime", "token-file"},
	"slipway checkpoint suspend":     {"runtime", "token-file"},
	"slipway checkpoint resume":      {"runtime", "token-file"},
	"slipway checkpoint durable":     {"runtime", "token-file"},
	"slipway cleanup list":           {"state"},
	"slipway console serve":          {"control", "repo", "runtime", "token-file"},
	"slipway control serve":          {"repo"},
	"slipway cost":                   {"repo", "state"},
	"slipway evidence show":          {"repo"},
	"slipway evidence verify":        {"repo"},
	"slipway gc":                     {"repo", "runtime", "token-file"},
	"slipway generation diff":        {"repo"},
	"slipway generation show":        {"repo"},
	"slipway generation list":        {"repo"},
	"slipway incidents":              {"state"},
	"slipway job cancel":             {"control", "token-file"},
	"slipway job list":               {"control", "token-file"},
	"slipway job logs":               {"control", "token-file"},
	"slipway job show":               {"control", "token-file"},
	"slipway job submit":             {"control", "token-file"},
	"slipway job trace":              {"control", "token-file"},
	"slipway pool set":               {"repo", "runtime", "token-file"},
	"slipway pool show":              {"repo"},
	"slipway promote":                {"repo"},
	"slipway render":                 {"repo"},
	"slipway rollout abort":          {"repo"},
	"slipway rollout resume":         {"repo", "runtime", "token-file"},
	"slipway rollout rollback":       {"repo", "runtime", "token-file"},
	"slipway rollout start":          {"repo", "runtime", "token-file"},
	"slipway rollout status":         {"repo"},
	"slipway rollout history":        {"repo"},
	"slipway runs query":             {"runtime", "state", "token-file"},
	"slipway runs related":           {"runtime", "state", "token-file"},
	"slipway runs show":              {"runtime", "state", "token-file"},
	"slipway runtime policy":         {"runtime", "token-file"},
	"slipway runtime serve":          {"repo", "state", "token-file"},
}

// TestOneNamePerConcept walks the tree: each command takes exactly the
// concepts the table says, under their one name, visible in its help with
// the variable that fills it; every old spelling is a hidden, deprecated
// alias bound to the same value; no visible flag is spelled the old way.
func TestOneNamePerConcept(t *testing.T) {
	old := map[string]bool{}
	for _, k := range flagConcepts {
		for _, w := range k.was {
			old[w] = true
		}
	}
	seen := map[string]bool{}
	commandTree(t, func(c *cobra.Command) {
		path := c.CommandPath()
		var got []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if old[f.Name] && f.Deprecated == "" {
				t.Errorf("%s: --%s is an old spelling, visible", path, f.Name)
			}
			for _, k := range flagConcepts {
				if f.Name == k.name && f.Deprecated == "" {
					got = append(got, k.name)
					if f.Hidden || !strings.Contains(f.Usage, "$"+k.env) {
						t.Errorf("%s --%s: hidden or its help %q does not name $%s", path, f.Name, f.Usage, k.env)
					}
				}
			}
		})
		want, ok := conceptsByCommand[path]
		seen[path] = ok
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s takes %v; the table says %v", path, got, want)
		}
		for _, name := range got {
			k := flagConcepts[slices.IndexFunc(flagConcepts, func(k flagConcept) bool { return k.name == name })]
			for _, was := range k.was {
				if !ambiguousAlias(c.Flags(), name, was) {
					checkAlias(t, c, name, was)
				}
			}
		}
	})
	for path := range conceptsByCommand {
		if !seen[path] {
			t.Errorf("the table names %s, which is no command", path)
		}
	}
}

// checkAlias parses the old spelling on a fresh tree and reads the value
// back from the one name.
func checkAlias(t *testing.T, c *cobra.Command, name, was string) {
	t.Helper()
	a := c.Flags().Lookup(was)
	if a == nil || !a.Hidden || !strings.Contains(a.Deprecated, "use --"+name) {
		t.Errorf("%s: --%s is not a hidden, deprecated alias of --%s: %+v", c.CommandPath(), was, name, a)
		return
	}
	root := NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	fresh, _, err := root.Find(argv(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.ParseFlags([]string{"--" + was, "v1"}); err != nil {
		t.Fatalf("%s --%s v1: %v", c.CommandPath(), was, err)
	}
	if v := fresh.Flags().Lookup(name).Value.String(); !strings.Contains(v, "v1") {
		t.Errorf("%s --%s v1: --%s is %q", c.CommandPath(), was, name, v)
	}
}

// TestOldSpellingsWarn: through Main, every old spelling in every command
// that has it is accepted with a deprecation warning on stderr (and never on
// stdout, where results go). An unknown flag after it stops the command
// before it runs.
func TestOldSpellingsWarn(t *testing.T) {
	type alias struct{ path, was, name string }
	var all []alias
	commandTree(t, func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Deprecated != "" {
				all = append(all, alias{c.CommandPath(), f.Name, strings.TrimPrefix(strings.Fields(f.Deprecated)[1], "--")})
			}
		})
	})
	renames := 0
	for _, a := range all {
		for _, r := range flagRenames {
			if r.command == a.path && r.was == a.was && r.name == a.name {
				renames++
			}
		}
		args := append(strings.Fields(a.path)[1:], "--"+a.was, "x", "--no-such-flag")
		r := run(t, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "Flag --"+a.was+" has been deprecated, use --"+a.name) || r.stdout != "" {
			t.Errorf("slipway %s: code %d, stdout %q, stderr %q; want the deprecation on stderr", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if renames != len(flagRenames) || len(all) < 30 {
		t.Errorf("%d aliases, %d of %d renames", len(all), renames, len(flagRenames))
	}
}

// TestConceptsFromEnv: each concept's variable fills its flag in every
// command that takes it; a flag given, by its name or its old spelling,
// wins; a flag the command takes instead keeps the variable out.
func TestConceptsFromEnv(t *testing.T) {
	env := map[string]string{}
	for _, k := range flagConcepts {
		env[k.env] = "/from/" + k.env
	}
	getenv := func(k string) string { return env[k] }
	commandTree(t, func(c *cobra.Command) {
		for _, k := range flagConcepts {
			if f := c.LocalFlags().Lookup(k.name); f == nil || f.Deprecated != "" {
				continue
			}
			getenv := func(v string) string { // this concept's variable only
				if v != k.env {
					return ""
				}
				return env[v]
			}
			for _, given := range append([]string{k.name}, k.was...) {
				if given != k.name && ambiguousAlias(c.Flags(), k.name, given) {
					continue // no alias on this command (flagnames.go)
				}
				root := NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
				fresh, _, _ := root.Find(argv(c))
				_ = fresh.ParseFlags(nil)
				if err := conceptsFromEnv(fresh, getenv, io.Discard); err != nil {
					t.Fatal(err)
				}
				if got := fresh.Flags().Lookup(k.name).Value.String(); !strings.Contains(got, env[k.env]) {
					t.Errorf("%s: $%s set, --%s is %q", c.CommandPath(), k.env, k.name, got)
				}
				root = NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
				fresh, _, _ = root.Find(argv(c))
				if err := fresh.ParseFlags([]string{"--" + given, "/given"}); err != nil {
					t.Fatal(err)
				}
				if err := conceptsFromEnv(fresh, getenv, io.Discard); err != nil {
					t.Fatal(err)
				}
				f := fresh.Flags().Lookup(k.name)
				if got := f.Value.String(); strings.Contains(got, "/from/") || !f.Changed {
					t.Errorf("%s --%s /given with $%s set: --%s is %q (changed %v)", c.CommandPath(), given, k.env, k.name, got, f.Changed)
				}
			}
		}
	})
	// runs: --runtime given keeps $SLIPWAY_STATE out (they exclude each other).
	root := NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	fresh, _, _ := root.Find([]string{"runs", "show"})
	_ = fresh.ParseFlags([]string{"--runtime", "http://127.0.0.1:1"})
	if err := conceptsFromEnv(fresh, getenv, io.Discard); err != nil || fresh.Flags().Lookup("state").Changed {
		t.Errorf("runs show --runtime with $SLIPWAY_STATE: --state given (%v)", err)
	}
	// Both spellings at once are one flag given twice.
	root = NewCmdRoot(&globals{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	fresh, _, _ = root.Find([]string{"runs", "show"})
	_ = fresh.ParseFlags([]string{"--runtime", "http://a", "--server", "http://b"})
	if err := conceptsFromEnv(fresh, getenv, io.Discard); err == nil {
		t.Error("--runtime and --server together: no error")
	}
}

// TestConceptsFromEnvThroughMain runs commands with the variables only,
// then with a flag that overrides them: the error names the value used.
func TestConceptsFromEnvThroughMain(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "t.token")
	if err := os.WriteFile(tok, []byte("secret-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLIPWAY_TOKEN_FILE", tok)
	t.Setenv("SLIPWAY_RUNTIME", "http://127.0.0.1:1")
	t.Setenv("SLIPWAY_CONTROL", "http://127.0.0.1:2")
	t.Setenv("SLIPWAY_REPO", filepath.Join(dir, "no-such-repo"))
	t.Setenv("SLIPWAY_STATE", filepath.Join(dir, "no-such-state"))
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"runtime", "policy"}, "127.0.0.1:1"},
		{[]string{"runtime", "policy", "--runtime", "http://127.0.0.1:3"}, "127.0.0.1:3"},
		{[]string{"runtime", "policy", "--server", "http://127.0.0.1:3"}, "127.0.0.1:3"},
		{[]string{"job", "list"}, "127.0.0.1:2"},
		{[]string{"job", "list", "--control", "http://127.0.0.1:4"}, "127.0.0.1:4"},
		{[]string{"rollout", "status", "--pool", "p"}, "no-such-repo"},
		{[]string{"rollout", "status", "--pool", "p", "--repo", filepath.Join(dir, "other-repo")}, "other-repo"},
		{[]string{"cleanup", "list"}, "no-such-state"},
		{[]string{"cleanup", "list", "--state", filepath.Join(dir, "other-state")}, "other-state"},
	} {
		r := run(t, "", c.args...)
		if r.code == exitOK || !strings.Contains(r.stderr, c.say) || strings.Contains(r.stderr+r.stdout, "secret-token-value") {
			t.Errorf("slipway %s: code %d, stderr %q; want an error naming %s", strings.Join(c.args, " "), r.code, r.stderr, c.say)
		}
	}
	// The old variable still fills --control, with a warning.
	t.Setenv("SLIPWAY_CONTROL", "")
	t.Setenv("SLIPWAY_CONTROL_URL", "http://127.0.0.1:5")
	r := run(t, "", "job", "list")
	if !strings.Contains(r.stderr, "127.0.0.1:5") || !strings.Contains(r.stderr, "$SLIPWAY_CONTROL_URL has been deprecated, use $SLIPWAY_CONTROL") {
		t.Errorf("$SLIPWAY_CONTROL_URL: %+v", r)
	}
}
