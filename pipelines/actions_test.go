package pipelines

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/strictyaml"
)

// The composite action metadata GitHub reads (action.yml), every field this
// project uses; strictyaml refuses any other.
type action struct {
	Name        string                  `yaml:"name"`
	Description string                  `yaml:"description"`
	Inputs      map[string]actionInput  `yaml:"inputs"`
	Outputs     map[string]actionOutput `yaml:"outputs"`
	Runs        struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
}

type actionInput struct {
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	Default     string `yaml:"default"`
}

type actionOutput struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

type actionStep struct {
	ID    string            `yaml:"id"`
	Name  string            `yaml:"name"`
	If    string            `yaml:"if"`
	Run   string            `yaml:"run"`
	Shell string            `yaml:"shell"`
	Uses  string            `yaml:"uses"`
	With  map[string]string `yaml:"with"`
	Env   map[string]string `yaml:"env"`
}

var (
	outputValueRE = regexp.MustCompile(`^\$\{\{ steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+) \}\}$`)
	inputRefRE    = regexp.MustCompile(`\binputs\.([A-Za-z0-9_-]+)`)
	pinnedUsesRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
)

// checkAction validates one action.yml beyond what YAML decoding does and
// returns its problems as file:line: message.
func checkAction(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var a action
	doc, err := strictyaml.Decode(b, &a)
	if err != nil {
		return []string{fmt.Sprintf("%s:%v", file, err)}
	}
	var probs []string
	bad := func(path, format string, args ...any) {
		probs = append(probs, fmt.Sprintf("%s:%d: %s: %s", file, doc.Line(path), path, fmt.Sprintf(format, args...)))
	}
	if a.Name == "" {
		bad("name", "required")
	}
	if a.Description == "" {
		bad("description", "required")
	}
	if a.Runs.Using != "composite" {
		bad("runs.using", "want composite, got %q", a.Runs.Using)
	}
	if len(a.Runs.Steps) == 0 {
		bad("runs.steps", "no steps")
	}
	for _, name := range sortedKeys(a.Inputs) {
		if a.Inputs[name].Description == "" {
			bad("inputs."+name+".description", "required")
		}
	}
	ids := map[string]bool{}
	used := map[string]bool{}
	slipwayCalls := 0
	for i, s := range a.Runs.Steps {
		p := fmt.Sprintf("runs.steps[%d]", i)
		if s.ID != "" {
			if ids[s.ID] {
				bad(p+".id", "%q given twice", s.ID)
			}
			ids[s.ID] = true
		}
		switch {
		case (s.Run == "") == (s.Uses == ""):
			bad(p, "a step has run or uses, exactly one")
		case s.Run != "":
			if !slices.Contains([]string{"bash", "sh", "pwsh", "python"}, s.Shell) {
				bad(p+".shell", "a run step of a composite action needs shell (bash, sh, pwsh or python), got %q", s.Shell)
			}
			// Inputs reach the shell through env, never spliced into the
			// script (script injection).
			if strings.Contains(s.Run, "${{") {
				bad(p+".run", "an expression in the script: pass it through env")
			}
			if n := strings.Count(s.Run, "slipway "); n > 0 {
				slipwayCalls += n
				if !strings.Contains(s.Run, "--ci github") {
					bad(p+".run", "slipway without --ci github: its outputs would not reach the step")
				}
			}
		case s.Uses != "":
			if s.Shell != "" {
				bad(p+".shell", "a uses step takes no shell")
			}
			if !strings.HasPrefix(s.Uses, "./") && !pinnedUsesRE.MatchString(s.Uses) {
				bad(p+".uses", "%q: pin an action by its full commit sha", s.Uses)
			}
		}
		for _, v := range append(mapValues(s.Env), append(mapValues(s.With), s.If)...) {
			for _, m := range inputRefRE.FindAllStringSubmatch(v, -1) {
				used[m[1]] = true
				if _, ok := a.Inputs[m[1]]; !ok {
					bad(p, "uses inputs.%s, which the action does not declare", m[1])
				}
			}
		}
	}
	for _, name := range sortedKeys(a.Inputs) {
		if !used[name] {
			bad("inputs."+name, "declared but never used")
		}
	}
	if filepath.Base(filepath.Dir(file)) != "setup" && slipwayCalls != 1 {
		bad("runs.steps", "want exactly one slipway command, found %d", slipwayCalls)
	}
	for _, name := range sortedKeys(a.Outputs) {
		o := a.Outputs[name]
		p := "outputs." + name
		if o.Description == "" {
			bad(p+".description", "required")
		}
		m := outputValueRE.FindStringSubmatch(o.Value)
		if m == nil {
			bad(p+".value", "want ${{ steps.<id>.outputs.<name> }}, got %q", o.Value)
		} else if !ids[m[1]] {
			bad(p+".value", "no step has id %q", m[1])
		}
	}
	return probs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func mapValues(m map[string]string) []string {
	var vs []string
	for _, k := range sortedKeys(m) {
		vs = append(vs, m[k])
	}
	return vs
}

// TestActionsSchema checks every composite action in github/: actionlint
// checks workflows only (and a local action's inputs and outputs where a
// workflow uses it), so the actions' own rules are checked here.
func TestActionsSchema(t *testing.T) {
	files, err := filepath.Glob("github/*/action.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"generation-create", "lint", "pin", "promote", "rollout", "setup", "template-build", "verify"}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(filepath.Dir(f)))
		for _, p := range checkAction(f) {
			t.Error(p)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("actions %v, want %v", got, want)
	}
}

// TestActionsSchemaRefuses: the check catches what it claims to.
func TestActionsSchemaRefuses(t *testing.T) {
	cases := map[string]string{ // name: action.yml
		"unknown field": "name: x\ndescription: y\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github, shell: bash}]\nbranding: {}\n",
		"not composite": "name: x\ndescription: y\nruns:\n  using: node20\n  steps: [{run: slipway lint --ci github, shell: bash}]\n",
		"no shell":      "name: x\ndescription: y\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github}]\n",
		"injection":     "name: x\ndescription: y\ninputs: {p: {description: d}}\nruns:\n  using: composite\n  steps: [{run: 'slipway lint --ci github ${{ inputs.p }}', shell: bash}]\n",
		"no --ci":       "name: x\ndescription: y\nruns:\n  using: composite\n  steps: [{run: slipway lint ., shell: bash}]\n",
		"bad output":    "name: x\ndescription: y\noutputs: {o: {description: d, value: '${{ steps.nope.outputs.o }}'}}\nruns:\n  using: composite\n  steps: [{id: s, run: slipway lint --ci github, shell: bash}]\n",
		"mutable uses":  "name: x\ndescription: y\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github, shell: bash}, {uses: actions/upload-artifact@v4}]\n",
		"unused input":  "name: x\ndescription: y\ninputs: {p: {description: d}}\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github, shell: bash}]\n",
		"undeclared":    "name: x\ndescription: y\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github, shell: bash, env: {P: '${{ inputs.p }}'}}]\n",
		"no name":       "description: y\nruns:\n  using: composite\n  steps: [{run: slipway lint --ci github, shell: bash}]\n",
	}
	wants := map[string]string{
		"unknown field": `unknown field "branding"`,
		"not composite": "want composite",
		"no shell":      "needs shell",
		"injection":     "pass it through env",
		"no --ci":       "without --ci github",
		"bad output":    "no step has id \"nope\"",
		"mutable uses":  "full commit sha",
		"unused input":  "never used",
		"undeclared":    "does not declare",
		"no name":       "name: required",
	}
	for name, body := range cases {
		f := filepath.Join(t.TempDir(), "lint", "action.yml")
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		probs := checkAction(f)
		if len(probs) == 0 {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(probs[0], wants[name]) {
			t.Errorf("%s: %q, want it to say %q", name, probs[0], wants[name])
		}
		if !strings.HasPrefix(probs[0], f+":") {
			t.Errorf("%s: %q does not name the file", name, probs[0])
		}
	}
}
