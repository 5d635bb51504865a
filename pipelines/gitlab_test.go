package pipelines

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/slipway-dev/slipway/testharness/need"
)

// gitlabCILocal is gitlab-ci-local's dist/index.js ($GITLAB_CI_LOCAL, which
// make sets to its copy under $SLIPWAY_NPM_CACHE) and node; the test skips
// when either is missing, or fails in CI (package need).
func gitlabCILocal(t *testing.T) (node, index string) {
	t.Helper()
	index = need.Env(t, "GITLAB_CI_LOCAL", "`make gitlab-ci-local` installs gitlab-ci-local 4.75.1 from npm into $SLIPWAY_NPM_CACHE and make sets it")
	if _, err := os.Stat(index); err != nil {
		need.Missing(t, "gitlab-ci-local is not installed (%v): run `make gitlab-ci-local`", err)
	}
	return need.Binary(t, "node", "gitlab-ci-local needs it (apt-get install nodejs npm)"), index
}

// gitlabSchema compiles GitLab's CI JSON schema (ci.json) as the
// gitlab-ci-local package embeds it.
func gitlabSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	node, index := gitlabCILocal(t)
	out, err := exec.Command(node, "gitlab/testdata/ci-schema.mjs", index).Output()
	if err != nil {
		t.Fatalf("extracting ci.json from %s: %v", index, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("https://gitlab.com/.gitlab-ci.yml", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://gitlab.com/.gitlab-ci.yml")
	if err != nil {
		t.Fatalf("compiling GitLab's ci.json: %v", err)
	}
	return s
}

// yamlDocs reads every YAML document of a file as JSON values.
func yamlDocs(b []byte) ([]any, error) {
	var docs []any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		d, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
}

// checkGitLabFile validates each document of a GitLab CI file against the
// schema; a component template must be a spec: inputs: header, then the
// job, each a slipway command with --ci gitlab and a dotenv report.
func checkGitLabFile(s *jsonschema.Schema, file string, template bool) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	docs, err := yamlDocs(b)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", file, err)}
	}
	var probs []string
	for i, d := range docs {
		if err := s.Validate(d); err != nil {
			probs = append(probs, fmt.Sprintf("%s: document %d: %v", file, i+1, err))
		}
	}
	if !template {
		return probs
	}
	if len(docs) != 2 {
		return append(probs, fmt.Sprintf("%s: %d documents, want the spec header and the job", file, len(docs)))
	}
	head, _ := docs[0].(map[string]any)
	if spec, _ := head["spec"].(map[string]any); len(head) != 1 || spec["inputs"] == nil {
		probs = append(probs, fmt.Sprintf("%s: the first document must be spec: inputs: only", file))
	}
	jobs, _ := docs[1].(map[string]any)
	want := "slipway-" + strings.TrimSuffix(filepath.Base(file), ".yml")
	job, _ := jobs[want].(map[string]any)
	if len(jobs) != 1 || job == nil {
		return append(probs, fmt.Sprintf("%s: want one job, %s", file, want))
	}
	script := fmt.Sprint(job["script"])
	if strings.Contains(script, "$[[") {
		probs = append(probs, fmt.Sprintf("%s: an input spliced into the script: pass it through variables", file))
	}
	if want == "slipway-setup" {
		// It installs slipway (TestGitLabSetupRelease) rather than run it:
		// its output is the binary, an artifact.
		arts, _ := job["artifacts"].(map[string]any)
		if paths := fmt.Sprint(arts["paths"]); paths != "[.slipway/bin/slipway]" {
			probs = append(probs, fmt.Sprintf("%s: artifacts:paths %s, want [.slipway/bin/slipway]", file, paths))
		}
		return probs
	}
	if !strings.Contains(script, `export PATH="$CI_PROJECT_DIR/.slipway/bin:$PATH"`) {
		probs = append(probs, fmt.Sprintf("%s: the script does not put slipway-setup's .slipway/bin first on PATH", file))
	}
	if strings.Count(script, "slipway ") != 1 || !strings.Contains(script, "--ci gitlab --gitlab-dotenv slipway.env") {
		probs = append(probs, fmt.Sprintf("%s: want one slipway command with --ci gitlab --gitlab-dotenv slipway.env: %s", file, script))
	}
	arts, _ := job["artifacts"].(map[string]any)
	reports, _ := arts["reports"].(map[string]any)
	if reports["dotenv"] != "slipway.env" {
		probs = append(probs, fmt.Sprintf("%s: artifacts:reports:dotenv must be slipway.env", file))
	}
	return probs
}

// TestGitLabSchema validates every component template (both documents) and
// the example pipelines against GitLab's published CI schema, and shows the
// check refuses a wrong keyword.
func TestGitLabSchema(t *testing.T) {
	s := gitlabSchema(t)
	files, _ := filepath.Glob("gitlab/templates/*.yml")
	var got []string
	for _, f := range files {
		got = append(got, strings.TrimSuffix(filepath.Base(f), ".yml"))
		for _, p := range checkGitLabFile(s, f, true) {
			t.Error(p)
		}
	}
	if want := []string{"generation-create", "lint", "pin", "promote", "rollout", "setup", "template-build", "verify"}; !slices.Equal(got, want) {
		t.Errorf("templates %v, want %v", got, want)
	}
	for _, f := range []string{"../examples/gitlab/.gitlab-ci.yml", "../examples/gitlab/local.gitlab-ci.yml"} {
		for _, p := range checkGitLabFile(s, f, false) {
			t.Error(p)
		}
	}

	lint, _ := os.ReadFile("gitlab/templates/lint.yml")
	for name, bad := range map[string]string{
		"unknown keyword": strings.Replace(string(lint), "  artifacts:\n", "  artefacts:\n", 1),
		"report kind":     strings.Replace(string(lint), "codequality:", "code_quality:", 1),
		"input type":      strings.Replace(string(lint), "      default: test\n", "      default: test\n      type: bool\n", 1),
	} {
		f := filepath.Join(t.TempDir(), "lint.yml")
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if probs := checkGitLabFile(s, f, true); len(probs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
