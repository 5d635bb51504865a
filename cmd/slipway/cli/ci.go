package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/slipway-dev/slipway/internal/cioutput"
	"github.com/slipway-dev/slipway/pkg/config/generation"
	"github.com/slipway-dev/slipway/pkg/config/pool"
	"github.com/slipway-dev/slipway/pkg/release"
	"github.com/slipway-dev/slipway/pkg/release/pin"
	"github.com/slipway-dev/slipway/pkg/release/policy"
)

// ciFlags choose where a step's outputs go besides stdout.
type ciFlags struct {
	mode          string
	tektonResults string
	gitlabDotenv  string
	gitlabQuality string
	writer        cioutput.Writer // set by setup
	format        cioutput.Format
}

func (c *ciFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.mode, "ci", "none", "also write the step's outputs in a CI system's form: none, github ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY, ::error annotations), tekton (--tekton-results), gitlab (--gitlab-dotenv), or auto (from GITHUB_ACTIONS, GITLAB_CI, --tekton-results)")
	fs.StringVar(&c.tektonResults, "tekton-results", "", "Tekton results directory: one file per result (--ci tekton)")
	fs.StringVar(&c.gitlabDotenv, "gitlab-dotenv", "slipway.env", "dotenv report to append to (--ci gitlab; artifacts:reports:dotenv)")
	fs.StringVar(&c.gitlabQuality, "gitlab-code-quality", "", "Code Quality report to add findings to, written even with none (--ci gitlab; artifacts:reports:codequality)")
}

// setup resolves --ci into a writer. Every error is a usage error.
func (c *ciFlags) setup(getenv func(string) string, g *globals) error {
	f, err := cioutput.ParseFormat(c.mode)
	if err != nil {
		return usage(err)
	}
	if f == cioutput.Auto {
		f = cioutput.Detect(getenv, c.tektonResults)
	}
	c.format = f
	switch f {
	case cioutput.GitHub:
		c.writer = &cioutput.GitHubWriter{
			OutputFile:  getenv("GITHUB_OUTPUT"),
			SummaryFile: getenv("GITHUB_STEP_SUMMARY"),
			Workspace:   getenv("GITHUB_WORKSPACE"),
			Stdout:      g.stdout,
		}
		if getenv("GITHUB_OUTPUT") == "" {
			return usage(errors.New("--ci github: GITHUB_OUTPUT is not set (not in a GitHub Actions step?)"))
		}
	case cioutput.Tekton:
		if c.tektonResults == "" {
			return usage(errors.New("--ci tekton needs --tekton-results DIR"))
		}
		c.writer = &cioutput.TektonWriter{Dir: c.tektonResults}
	case cioutput.GitLab:
		c.writer = &cioutput.GitLabWriter{File: c.gitlabDotenv, CodeQualityFile: c.gitlabQuality, ProjectDir: getenv("CI_PROJECT_DIR")}
	default:
		c.writer = cioutput.Discard{}
	}
	return nil
}

// ci writes a step for the CI system (a no-op without --ci).
func (g *globals) ci(s cioutput.Step) error {
	if g.cif.writer == nil {
		return nil
	}
	if err := g.cif.writer.Write(s); err != nil {
		return usage(err)
	}
	return nil
}

// ciError reports a command's error as an annotation (GitHub only: the
// other systems show the step's log).
func (g *globals) ciError(cmd string, err error) {
	if g.cif.format != cioutput.GitHub || g.cif.writer == nil {
		return
	}
	title := "slipway"
	if cmd != "" {
		title = "slipway " + cmd
	}
	// A failure to annotate is not worth hiding the command's own error.
	_ = g.cif.writer.Write(cioutput.Step{Title: title, Annotations: []cioutput.Annotation{{Level: cioutput.Error, Title: title, Message: err.Error()}}})
}

func lintStep(findings []pin.Finding) cioutput.Step {
	s := cioutput.Step{Title: "slipway lint", Outputs: []cioutput.Output{{Name: "findings", Value: strconv.Itoa(len(findings))}}}
	for _, f := range findings {
		title, check := "mutable image reference", "slipway/mutable-image-reference"
		switch {
		case f.Placeholder:
			title, check = "image placeholder not checked", "slipway/image-placeholder"
		case f.FoundBy == pin.ByImageKey:
			title, check = "image-like field not pinned", "slipway/image-like-field"
		}
		s.Details = append(s.Details, f.String())
		s.Annotations = append(s.Annotations, cioutput.Annotation{
			Level: cioutput.Error, File: f.File, Line: f.Line, Col: f.Col,
			Title: title, Message: f.Ref + ": " + f.Reason, Check: check,
		})
	}
	return s
}

func pinStep(r pinReport, changes int) cioutput.Step {
	s := cioutput.Step{Title: "slipway pin", Outputs: []cioutput.Output{
		{Name: "changes", Value: strconv.Itoa(changes)},
		{Name: "written", Value: strconv.FormatBool(r.Write)},
		{Name: "lock", Value: r.Lock},
	}}
	for _, f := range r.Files {
		for _, c := range f.Changes {
			s.Details = append(s.Details, fmt.Sprintf("%s: %s -> %s", c.Pos(), c.From, c.To))
		}
	}
	return s
}

func templateStep(res *release.TemplateRelease) cioutput.Step {
	s := cioutput.Step{Title: "slipway template build " + res.Name, Outputs: []cioutput.Output{
		{Name: "digest", Value: res.TemplateID},
		{Name: "ref", Value: res.Ref},
		{Name: "template-id", Value: res.TemplateID},
		{Name: "content-id", Value: res.ContentID},
	}}
	if res.Ref != "" {
		url, _, _ := strings.Cut(res.Ref, "@")
		s.Image = &cioutput.Image{URL: url, Digest: res.TemplateID}
	}
	if res.Sign != nil {
		s.Details = append(s.Details, "signed and attested")
	}
	return s
}

func generationStep(gen *generation.Generation, file string) cioutput.Step {
	return cioutput.Step{Title: "slipway generation create", Outputs: []cioutput.Output{
		{Name: "generation", Value: gen.ID},
		{Name: "sequence", Value: strconv.FormatInt(gen.Sequence, 10)},
		{Name: "file", Value: file},
	}}
}

func promoteStep(res *release.PromoteResult) cioutput.Step {
	var commit, status, branch string
	if res.Result != nil {
		commit, status, branch = res.Commit, string(res.Status), res.Branch
	}
	return cioutput.Step{Title: "slipway promote", Outputs: []cioutput.Output{
		{Name: "generation", Value: res.Generation},
		{Name: "commit", Value: commit},
		{Name: "status", Value: status},
		{Name: "branch", Value: branch},
		{Name: "pull-request", Value: res.PullRequest},
	}}
}

func rolloutStep(r *pool.Rollout) cioutput.Step {
	s := cioutput.Step{Title: "slipway rollout", Outputs: []cioutput.Output{
		{Name: "rollout", Value: r.ID},
		{Name: "status", Value: r.Status},
		{Name: "phase", Value: r.Phase},
		{Name: "generation", Value: r.To},
	}}
	if r.Reason != "" {
		s.Details = append(s.Details, r.Reason)
	}
	return s
}

func verifyStep(res *policy.Result) cioutput.Step {
	s := cioutput.Step{Title: "slipway verify", Outputs: []cioutput.Output{
		{Name: "verified", Value: strconv.FormatBool(res.Verified)},
		{Name: "ref", Value: res.Ref},
		{Name: "digest", Value: res.Digest},
	}}
	for _, c := range res.Checks {
		if !c.Passed {
			s.Details = append(s.Details, c.Name+": "+c.Reason)
			s.Annotations = append(s.Annotations, cioutput.Annotation{Level: cioutput.Error, Title: "verification refused: " + c.Name, Message: c.Reason})
		}
	}
	return s
}
