package scan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error families: one errors.Is covers each class.
var (
	// ErrFindings: the scan found something that must not be frozen.
	// Report.Err wraps it.
	ErrFindings = errors.New("security scan findings")
	// ErrConfig: an invalid option or scrub path.
	ErrConfig = errors.New("invalid scan config")
	// ErrRootfs: the rootfs cannot be read or changed (missing, not a
	// directory, an unreadable file or directory, a failed removal).
	ErrRootfs = errors.New("rootfs")
)

// Finding is one thing the scan refuses. Detail describes it without any part
// of a secret value: the kind of value and its length at most.
type Finding struct {
	Rule Rule `json:"rule"`
	// Path is absolute inside the rootfs, slash-separated.
	Path string `json:"path"`
	// Line is 1-based; 0 when the rule is not about a line.
	Line   int    `json:"line,omitempty"`
	Detail string `json:"detail"`
	// AllowedBy is the Allow (rule:glob) that exempted the finding; set only
	// in Report.Allowed.
	AllowedBy string `json:"allowedBy,omitempty"`
}

// String is path:line: rule, or path: rule when Line is 0.
func (f Finding) String() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", f.Path, f.Line, f.Rule)
	}
	return fmt.Sprintf("%s: %s", f.Path, f.Rule)
}

// Report is the result of Scan. Findings and Allowed are sorted by path, line
// and rule.
type Report struct {
	Findings []Finding `json:"findings"`
	Allowed  []Finding `json:"allowed,omitempty"`
	// Files is the number of regular files seen, Dirs the directories.
	Files int `json:"files"`
	Dirs  int `json:"dirs"`
	// Bytes is how much file content was read.
	Bytes int64 `json:"bytes"`
	// SkippedLarge counts files over the size limit and SkippedBinary files
	// with a NUL in their first 8 KiB: the content rules did not read them
	// (the name and mode rules still apply).
	SkippedLarge  int `json:"skippedLarge"`
	SkippedBinary int `json:"skippedBinary"`
}

// Err returns nil when there are no findings, else an error wrapping
// ErrFindings that lists path:line: rule for each (never a value).
func (r *Report) Err() error {
	if len(r.Findings) == 0 {
		return nil
	}
	lines := make([]string, len(r.Findings))
	for i, f := range r.Findings {
		lines[i] = f.String()
	}
	return fmt.Errorf("%w (%d):\n%s", ErrFindings, len(r.Findings), strings.Join(lines, "\n"))
}

func compareFindings(a, b Finding) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line), strings.Compare(string(a.Rule), string(b.Rule)))
}

// settle sorts the findings and moves the allowed ones to Allowed.
func (r *Report) settle(allow []Allow) {
	var kept []Finding
	for _, f := range r.Findings {
		i := slices.IndexFunc(allow, func(a Allow) bool { return a.matches(f) })
		if i < 0 {
			kept = append(kept, f)
			continue
		}
		f.AllowedBy = allow[i].String()
		r.Allowed = append(r.Allowed, f)
	}
	r.Findings = kept
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	slices.SortFunc(r.Findings, compareFindings)
	slices.SortFunc(r.Allowed, compareFindings)
}
