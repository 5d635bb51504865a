package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/cioutput"
)

// TestLintCIGitHub runs lint as a GitHub Actions step would: the finding is an
// ::error annotation on its line, the count goes to $GITHUB_OUTPUT and a
// summary to $GITHUB_STEP_SUMMARY, and the exit code stays 1.
func TestLintCIGitHub(t *testing.T) {
	dir := writeTree(t, map[string]string{"deploy/web.yaml": strings.ReplaceAll(deployment, "HOST", "registry.example")})
	ghDir := t.TempDir()
	outFile, sumFile := filepath.Join(ghDir, "output"), filepath.Join(ghDir, "summary")
	t.Setenv("GITHUB_OUTPUT", outFile)
	t.Setenv("GITHUB_STEP_SUMMARY", sumFile)
	t.Setenv("GITHUB_WORKSPACE", dir)

	r := run(t, dir, "lint", "--ci", "github", filepath.Join(dir, "deploy"))
	if r.code != 1 {
		t.Fatalf("lint: %+v", r)
	}
	want := "::error file=deploy/web.yaml,line=10,col=18,title=mutable image reference::registry.example/web:v1: tag without digest: imagePullPolicy Always"
	var annotations []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "::") {
			annotations = append(annotations, l)
		}
	}
	if len(annotations) != 1 || !strings.HasPrefix(annotations[0], want) {
		t.Fatalf("annotations %q\nwant one starting %q", annotations, want)
	}
	if got := read(t, outFile); got != "findings=1\n" {
		t.Fatalf("GITHUB_OUTPUT = %q", got)
	}
	sum := read(t, sumFile)
	if !strings.HasPrefix(sum, "### slipway lint\n") || !strings.Contains(sum, "| findings | 1 |") || !strings.Contains(sum, "web.yaml:10:18") {
		t.Fatalf("summary:\n%s", sum)
	}

	// An error (exit 2) is an annotation too, naming the path at fault.
	r = run(t, dir, "lint", "--ci", "github", "absent")
	if r.code != 2 || !strings.Contains(r.stdout, "::error title=slipway lint::") || !strings.Contains(r.stdout, "absent") {
		t.Fatalf("lint of a missing path: %+v", r)
	}

	// --ci github outside a step (no GITHUB_OUTPUT) is a usage error.
	t.Setenv("GITHUB_OUTPUT", "")
	if r := run(t, dir, "lint", "--ci", "github", "deploy"); r.code != 2 || !strings.Contains(r.stderr, "GITHUB_OUTPUT is not set") {
		t.Fatalf("no GITHUB_OUTPUT: %+v", r)
	}
}

// TestLintCITektonGitLab: the same step's count as a Tekton result file and
// a GitLab dotenv line; auto picks GitLab from GITLAB_CI.
func TestLintCITektonGitLab(t *testing.T) {
	dir := writeTree(t, map[string]string{"deploy/web.yaml": strings.ReplaceAll(deployment, "HOST", "registry.example")})
	results := t.TempDir()
	if r := run(t, dir, "lint", "--ci", "tekton", "--tekton-results", results, "deploy"); r.code != 1 || strings.Contains(r.stdout, "::error") {
		t.Fatalf("lint --ci tekton: %+v", r)
	}
	if got := read(t, filepath.Join(results, "FINDINGS")); got != "1" {
		t.Fatalf("FINDINGS = %q", got)
	}
	if r := run(t, dir, "lint", "--ci", "tekton", "deploy"); r.code != 2 || !strings.Contains(r.stderr, "--tekton-results") {
		t.Fatalf("--ci tekton without a results directory: %+v", r)
	}
	t.Setenv("GITHUB_ACTIONS", "")
	t.Setenv("GITLAB_CI", "true")
	if r := run(t, dir, "lint", "--ci", "auto", "deploy"); r.code != 1 {
		t.Fatalf("lint --ci auto: %+v", r)
	}
	if got := read(t, filepath.Join(dir, "slipway.env")); got != "FINDINGS=1\n" {
		t.Fatalf("slipway.env = %q", got)
	}
	if _, err := os.Stat(filepath.Join(results, "slipway.env")); err == nil {
		t.Fatal("dotenv written to the wrong place")
	}
}

// TestLintCIGitLabCodeQuality: lint --ci gitlab --gitlab-code-quality writes
// the finding into GitLab's Code Quality report, its path relative to
// $CI_PROJECT_DIR, and the count to the dotenv report; exit code stays 1.
func TestLintCIGitLabCodeQuality(t *testing.T) {
	dir := writeTree(t, map[string]string{"deploy/web.yaml": strings.ReplaceAll(deployment, "HOST", "registry.example")})
	t.Setenv("CI_PROJECT_DIR", dir)
	r := run(t, dir, "lint", "--ci", "gitlab", "--gitlab-code-quality", "gl-code-quality.json", filepath.Join(dir, "deploy"))
	if r.code != 1 {
		t.Fatalf("lint: %+v", r)
	}
	var issues []cioutput.CodeQualityIssue
	b := read(t, filepath.Join(dir, "gl-code-quality.json"))
	if err := json.Unmarshal([]byte(b), &issues); err != nil || len(issues) != 1 {
		t.Fatalf("report %v:\n%s", err, b)
	}
	is := issues[0]
	if is.CheckName != "slipway/mutable-image-reference" || is.Location.Path != "deploy/web.yaml" || is.Location.Lines.Begin != 10 ||
		!strings.HasPrefix(is.Description, "registry.example/web:v1: tag without digest") || is.Severity != "major" {
		t.Fatalf("issue %+v", is)
	}
	if got := read(t, filepath.Join(dir, "slipway.env")); got != "FINDINGS=1\n" {
		t.Fatalf("slipway.env = %q", got)
	}
}
