package cioutput

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
)

// DotenvMaxBytes is GitLab's limit on a dotenv report: the file must be
// smaller than this.
const DotenvMaxBytes = 5 * 1024

// GitLabWriter writes a Step's outputs as a dotenv report for
// artifacts:reports:dotenv: KEY=value lines appended to File, the key the
// output's name upper-cased with - as _. GitLab reads no line breaks in a
// value, no quoting and no comments, so a value with a line break is
// refused rather than cut. With CodeQualityFile set, the annotations at a
// place in a file are added to GitLab's Code Quality report there
// (artifacts:reports:codequality). The summary is not written: GitLab shows
// the job's log.
type GitLabWriter struct {
	File string
	// CodeQualityFile, if set, is the Code Quality report (a JSON array of
	// issues) the step's findings are added to; it is written even when there
	// are none.
	CodeQualityFile string
	// ProjectDir is $CI_PROJECT_DIR: report paths under it are made
	// relative, as GitLab wants them.
	ProjectDir string
}

// Write appends the outputs to File and adds the findings to
// CodeQualityFile. Both are checked before either is written, so a refused
// step writes neither.
func (w *GitLabWriter) Write(s Step) error {
	if err := s.check(); err != nil {
		return err
	}
	var b bytes.Buffer
	if len(s.Outputs) > 0 {
		if w.File == "" {
			return fmt.Errorf("%w: no dotenv file (--gitlab-dotenv)", ErrInvalid)
		}
		for _, o := range s.Outputs {
			if strings.ContainsAny(o.Value, "\r\n") {
				return fmt.Errorf("%w: output %s: a GitLab dotenv value cannot hold a line break", ErrInvalid, o.Name)
			}
			fmt.Fprintf(&b, "%s=%s\n", envName(o.Name), o.Value)
		}
		size := int64(0)
		if fi, err := os.Stat(w.File); err == nil {
			size = fi.Size()
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cioutput: %w", err)
		}
		if size+int64(b.Len()) >= DotenvMaxBytes {
			return fmt.Errorf("%w: dotenv file %s would reach %d bytes: GitLab takes less than %d", ErrInvalid, w.File, size+int64(b.Len()), DotenvMaxBytes)
		}
	}
	if w.CodeQualityFile != "" {
		if err := writeCodeQuality(w.CodeQualityFile, CodeQuality(s, w.ProjectDir)); err != nil {
			return err
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return appendFile(w.File, b.Bytes())
}
