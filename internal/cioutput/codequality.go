package cioutput

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/slipway-dev/slipway/internal/atomicfile"
)

// CodeQualityIssue is one entry of GitLab's Code Quality report
// (artifacts:reports:codequality), the subset of the Code Climate format
// GitLab reads.
type CodeQualityIssue struct {
	Description string              `json:"description"`
	CheckName   string              `json:"check_name"`
	Fingerprint string              `json:"fingerprint"`
	Severity    string              `json:"severity"`
	Location    CodeQualityLocation `json:"location"`
}

// CodeQualityLocation is where an issue is: a path relative to the
// project's root and the line it begins on.
type CodeQualityLocation struct {
	Path  string `json:"path"`
	Lines struct {
		Begin int `json:"begin"`
	} `json:"lines"`
}

// codeQualitySeverity maps a level to GitLab's severities (info, minor,
// major, critical, blocker).
var codeQualitySeverity = map[Level]string{Error: "major", Warning: "minor", Notice: "info"}

// CodeQuality turns the annotations that have a file into Code Quality
// issues (GitLab needs a path; the others stay in the job's log). Paths
// under projectDir ($CI_PROJECT_DIR) are made relative to it. The
// fingerprint is the sha256 of the check, path and message and the
// finding's rank among identical ones, never the line: a finding keeps its
// fingerprint when lines above it move, so GitLab's merge request widget
// does not report it as fixed and new.
func CodeQuality(s Step, projectDir string) []CodeQualityIssue {
	issues := []CodeQualityIssue{}
	seen := map[string]int{}
	for _, a := range s.Annotations {
		if a.File == "" {
			continue
		}
		check := a.Check
		if check == "" {
			check = "slipway"
		}
		path := relTo(projectDir, a.File)
		desc := a.Message
		if a.Title != "" && a.Check == "" {
			desc = a.Title + ": " + a.Message
		}
		key := check + "\x00" + path + "\x00" + desc
		n := seen[key]
		seen[key] = n + 1
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", key, n))
		is := CodeQualityIssue{
			Description: desc,
			CheckName:   check,
			Fingerprint: hex.EncodeToString(sum[:]),
			Severity:    codeQualitySeverity[a.Level],
		}
		is.Location.Path = path
		is.Location.Lines.Begin = max(a.Line, 1)
		issues = append(issues, is)
	}
	return issues
}

// writeCodeQuality adds the step's issues to the report at file: the issues
// already there (an earlier command of the same job) are kept, and the file
// is written whole and atomically (it is one JSON array). A report with no
// issues is still written, as [], so GitLab sees the findings resolved.
func writeCodeQuality(file string, issues []CodeQualityIssue) error {
	var all []CodeQualityIssue
	b, err := os.ReadFile(file)
	switch {
	case err == nil && len(strings.TrimSpace(string(b))) > 0:
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("%w: code quality report %s: not a JSON array of issues: %v", ErrInvalid, file, err)
		}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cioutput: %w", err)
	}
	all = append(all, issues...)
	if all == nil {
		all = []CodeQualityIssue{}
	}
	out, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return fmt.Errorf("cioutput: %w", err)
	}
	if err := atomicfile.Write(file, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("cioutput: writing %s: %w", file, err)
	}
	return nil
}
