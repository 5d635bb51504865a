package cioutput

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Writer writes a Step in one CI system's form.
type Writer interface {
	Write(Step) error
}

var (
	_ Writer = (*GitHubWriter)(nil)
	_ Writer = (*TektonWriter)(nil)
	_ Writer = (*GitLabWriter)(nil)
	_ Writer = Discard{}
)

// Discard writes nothing (the None form).
type Discard struct{}

// Write checks the step and writes nothing.
func (Discard) Write(s Step) error { return s.check() }

// GitHubWriter writes a Step the way a GitHub Actions step reports.
type GitHubWriter struct {
	// OutputFile is $GITHUB_OUTPUT (required when the step has outputs).
	OutputFile string
	// SummaryFile is $GITHUB_STEP_SUMMARY ("" writes no summary).
	SummaryFile string
	// Workspace is $GITHUB_WORKSPACE: an absolute annotation path under it
	// is made relative, so GitHub can put the annotation on the file.
	Workspace string
	// Stdout receives the workflow commands (annotations).
	Stdout io.Writer

	rand io.Reader // test hook for the heredoc delimiter
}

// Write appends the outputs to OutputFile and the summary to SummaryFile,
// and prints the annotations as workflow commands.
func (w *GitHubWriter) Write(s Step) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(s.Outputs) > 0 {
		if w.OutputFile == "" {
			return errors.New("cioutput: GITHUB_OUTPUT is not set: not running in a GitHub Actions step?")
		}
		b, err := w.outputs(s.Outputs)
		if err != nil {
			return err
		}
		if err := appendFile(w.OutputFile, b); err != nil {
			return err
		}
	}
	if w.SummaryFile != "" {
		if err := appendFile(w.SummaryFile, summary(s)); err != nil {
			return err
		}
	}
	if w.Stdout != nil && len(s.Annotations) > 0 {
		var b strings.Builder
		for _, a := range s.Annotations {
			b.WriteString(workflowCommand(a, w.Workspace))
			b.WriteByte('\n')
		}
		if _, err := io.WriteString(w.Stdout, b.String()); err != nil {
			return fmt.Errorf("cioutput: writing annotations: %w", err)
		}
	}
	return nil
}

// outputs is GitHub's file command format: name=value, or for a value with
// a line break name<<DELIM, the value, DELIM on lines of their own.
func (w *GitHubWriter) outputs(outs []Output) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range outs {
		if !strings.ContainsAny(o.Value, "\r\n") {
			fmt.Fprintf(&b, "%s=%s\n", o.Name, o.Value)
			continue
		}
		d, err := w.delimiter(o.Value)
		if err != nil {
			return nil, fmt.Errorf("cioutput: output %s: %w", o.Name, err)
		}
		fmt.Fprintf(&b, "%s<<%s\n%s\n%s\n", o.Name, d, o.Value, d)
	}
	return b.Bytes(), nil
}

// delimiter is a random heredoc delimiter that does not occur in value (as
// GitHub's toolkit makes them: ghadelimiter_ and random hex).
func (w *GitHubWriter) delimiter(value string) (string, error) {
	r := w.rand
	if r == nil {
		r = rand.Reader
	}
	for range 3 {
		var buf [16]byte
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", fmt.Errorf("random delimiter: %w", err)
		}
		d := "ghadelimiter_" + hex.EncodeToString(buf[:])
		if !strings.Contains(value, d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: the value holds every delimiter tried", ErrInvalid)
}

// summary is the step as Markdown: a heading, a table of outputs, the
// details as a list. Values are HTML-escaped, so a value cannot inject markup.
func summary(s Step) []byte {
	var b bytes.Buffer
	title := s.Title
	if title == "" {
		title = "slipway"
	}
	fmt.Fprintf(&b, "### %s\n\n", mdText(title))
	if len(s.Outputs) > 0 {
		b.WriteString("| output | value |\n| --- | --- |\n")
		for _, o := range s.Outputs {
			fmt.Fprintf(&b, "| %s | %s |\n", mdCell(o.Name), mdCell(o.Value))
		}
		b.WriteByte('\n')
	}
	for _, d := range s.Details {
		fmt.Fprintf(&b, "- %s\n", mdText(d))
	}
	for _, a := range s.Annotations {
		if a.File == "" {
			fmt.Fprintf(&b, "- **%s**: %s\n", a.Level, mdText(a.Message))
		}
	}
	if len(s.Details) > 0 || len(s.Annotations) > 0 {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

var mdEscaper = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)

func mdText(s string) string { return mdEscaper.Replace(html.EscapeString(s)) }

func mdCell(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = mdText(l)
	}
	return strings.Join(lines, "<br>")
}

// workflowCommand is ::LEVEL file=F,line=L,col=C,title=T::MESSAGE.
func workflowCommand(a Annotation, workspace string) string {
	var props []string
	if a.File != "" {
		props = append(props, "file="+escapeProperty(relTo(workspace, a.File)))
		if a.Line > 0 {
			props = append(props, "line="+strconv.Itoa(a.Line))
			if a.Col > 0 {
				props = append(props, "col="+strconv.Itoa(a.Col))
			}
		}
	}
	if a.Title != "" {
		props = append(props, "title="+escapeProperty(a.Title))
	}
	cmd := "::" + string(a.Level)
	if len(props) > 0 {
		cmd += " " + strings.Join(props, ",")
	}
	return cmd + "::" + escapeData(a.Message)
}

// escapeData escapes a workflow command's message as GitHub's toolkit does.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a property value: also : and , which end it.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

func relTo(workspace, file string) string {
	if workspace == "" || !filepath.IsAbs(file) {
		return filepath.ToSlash(file)
	}
	rel, err := filepath.Rel(workspace, file)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(file)
	}
	return filepath.ToSlash(rel)
}

// appendFile appends b in one write (GitHub's files are shared by a job's
// steps, so they are appended to, never replaced).
func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cioutput: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("cioutput: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cioutput: writing %s: %w", path, err)
	}
	return nil
}
