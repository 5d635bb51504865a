package cioutput

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseGitHubOutput reads a $GITHUB_OUTPUT file as the Actions runner does:
// a line with = before any << is name=value; a line with << first opens a
// heredoc closed by a line equal to the delimiter.
func parseGitHubOutput(t *testing.T, data string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		eq, hd := strings.Index(line, "="), strings.Index(line, "<<")
		switch {
		case eq >= 0 && (hd < 0 || eq < hd):
			out[line[:eq]] = line[eq+1:]
		case hd >= 0:
			name, delim := line[:hd], line[hd+2:]
			var lines []string
			closed := false
			for sc.Scan() {
				if sc.Text() == delim {
					closed = true
					break
				}
				lines = append(lines, sc.Text())
			}
			if !closed {
				t.Fatalf("heredoc %s not closed by %s", name, delim)
			}
			out[name] = strings.Join(lines, "\n")
		default:
			t.Fatalf("invalid line %q", line)
		}
	}
	return out
}

func TestGitHubOutputsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w := &GitHubWriter{OutputFile: filepath.Join(dir, "out"), SummaryFile: filepath.Join(dir, "sum")}
	outs := []Output{
		{"digest", "sha256:abc"},
		{"ref", "reg/x:1=2@sha256:abc"},
		{"notes", "line one\nline two\n\nDELIM\nlast"},
		{"trailing", "ends with a break\n"},
		{"empty", ""},
	}
	if err := w.Write(Step{Title: "t", Outputs: outs}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Step{Title: "t2", Outputs: []Output{{"second", "multi\nline"}}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	got := parseGitHubOutput(t, string(data))
	want := map[string]string{"second": "multi\nline"}
	for _, o := range outs {
		want[o.Name] = o.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("output %s = %q, want %q\nfile:\n%s", k, got[k], v, data)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d outputs, want %d: %v", len(got), len(want), got)
	}
	if !strings.Contains(string(data), "digest=sha256:abc\n") {
		t.Errorf("a single-line value should use name=value:\n%s", data)
	}
	// Two multi-line values get two different random delimiters.
	var delims []string
	for _, l := range strings.Split(string(data), "\n") {
		if i := strings.Index(l, "<<ghadelimiter_"); i > 0 {
			delims = append(delims, l[i+2:])
		}
	}
	if len(delims) != 3 || delims[0] == delims[1] || delims[1] == delims[2] {
		t.Errorf("delimiters %v: want 3 distinct", delims)
	}
}

func TestGitHubDelimiterNeverInValue(t *testing.T) {
	first := bytes.Repeat([]byte{0xaa}, 16)
	second := bytes.Repeat([]byte{0xbb}, 16)
	value := "x\nghadelimiter_" + strings.Repeat("aa", 16) + "\ny"
	w := &GitHubWriter{OutputFile: filepath.Join(t.TempDir(), "out"), rand: bytes.NewReader(append(first, second...))}
	if err := w.Write(Step{Outputs: []Output{{"v", value}}}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(w.OutputFile)
	if !strings.HasPrefix(string(data), "v<<ghadelimiter_"+strings.Repeat("bb", 16)+"\n") {
		t.Fatalf("the delimiter found in the value was used:\n%s", data)
	}
	if got := parseGitHubOutput(t, string(data))["v"]; got != value {
		t.Fatalf("v = %q, want %q", got, value)
	}
	// A value holding every delimiter the source gives is refused.
	w = &GitHubWriter{OutputFile: w.OutputFile, rand: bytes.NewReader(bytes.Repeat(first, 3))}
	if err := w.Write(Step{Outputs: []Output{{"v", value}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func TestGitHubAnnotationsEscaped(t *testing.T) {
	var stdout bytes.Buffer
	w := &GitHubWriter{OutputFile: filepath.Join(t.TempDir(), "out"), Workspace: "/ws", Stdout: &stdout}
	err := w.Write(Step{Annotations: []Annotation{
		{Level: Error, File: "/ws/deploy/a,b:c.yaml", Line: 3, Col: 12, Title: "mutable: ref, tag", Message: "100% bad\r\nnext ::error::x"},
		{Level: Warning, File: "/elsewhere/x.yaml", Line: 1, Message: "m"},
		{Level: Error, Message: "slipway: no key"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "::error file=deploy/a%2Cb%3Ac.yaml,line=3,col=12,title=mutable%3A ref%2C tag::100%25 bad%0D%0Anext ::error::x\n" +
		"::warning file=/elsewhere/x.yaml,line=1::m\n" +
		"::error::slipway: no key\n"
	if stdout.String() != want {
		t.Fatalf("annotations:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

func TestGitHubSummary(t *testing.T) {
	dir := t.TempDir()
	w := &GitHubWriter{OutputFile: filepath.Join(dir, "out"), SummaryFile: filepath.Join(dir, "sum")}
	err := w.Write(Step{
		Title:       "slipway lint",
		Outputs:     []Output{{"findings", "2"}, {"notes", "a|b\n<script>"}},
		Details:     []string{"deploy/x.yaml:3:12: nginx:1.25: tag without digest"},
		Annotations: []Annotation{{Level: Error, Message: "boom"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(w.SummaryFile)
	want := "### slipway lint\n\n| output | value |\n| --- | --- |\n| findings | 2 |\n| notes | a\\|b<br>&lt;script&gt; |\n\n" +
		"- deploy/x.yaml:3:12: nginx:1.25: tag without digest\n- **error**: boom\n\n"
	if string(got) != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
}

func TestGitHubNeedsOutputFile(t *testing.T) {
	err := (&GitHubWriter{}).Write(Step{Outputs: []Output{{"a", "b"}}})
	if err == nil || !strings.Contains(err.Error(), "GITHUB_OUTPUT is not set") {
		t.Fatalf("err = %v", err)
	}
}

func TestOutputNamesChecked(t *testing.T) {
	for _, s := range []Step{
		{Outputs: []Output{{"bad name", "x"}}},
		{Outputs: []Output{{"1st", "x"}}},
		{Outputs: []Output{{"a=b", "x"}}},
		{Outputs: []Output{{"template-id", "x"}, {"template_id", "y"}}},
		{Annotations: []Annotation{{Level: "fatal"}}},
	} {
		for _, w := range []Writer{&GitHubWriter{OutputFile: filepath.Join(t.TempDir(), "o")}, &TektonWriter{Dir: t.TempDir()}, &GitLabWriter{File: filepath.Join(t.TempDir(), "e")}, Discard{}} {
			if err := w.Write(s); !errors.Is(err, ErrInvalid) {
				t.Errorf("%T.Write(%+v) = %v, want ErrInvalid", w, s, err)
			}
		}
	}
}

func TestTektonResults(t *testing.T) {
	dir := t.TempDir()
	w := &TektonWriter{Dir: dir}
	err := w.Write(Step{
		Outputs: []Output{{"digest", "sha256:abc"}, {"template-id", "sha256:abc"}, {"notes", "two\nlines\n"}},
		Image:   &Image{URL: "127.0.0.1:5000/templates/minimal", Digest: "sha256:abc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"DIGEST": "sha256:abc", "TEMPLATE_ID": "sha256:abc", "NOTES": "two\nlines\n",
		"IMAGE_URL": "127.0.0.1:5000/templates/minimal", "IMAGE_DIGEST": "sha256:abc",
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want) {
		t.Errorf("%d result files, want %d", len(ents), len(want))
	}
	for name, v := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != v {
			t.Errorf("result %s = %q, %v; want %q", name, b, err, v)
		}
	}
	if err := w.Write(Step{Outputs: []Output{{"image-url", "x"}}, Image: &Image{URL: "u", Digest: "d"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an output named image-url beside an Image: err = %v, want ErrInvalid", err)
	}
	if err := (&TektonWriter{Dir: filepath.Join(dir, "absent")}).Write(Step{}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing results directory: err = %v", err)
	}
}

func TestGitLabDotenv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "slipway.env")
	w := &GitLabWriter{File: file}
	if err := w.Write(Step{Outputs: []Output{{"generation", "g-1f2e"}, {"template-id", "sha256:abc"}}, Image: &Image{URL: "u", Digest: "d"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Step{Outputs: []Output{{"commit", "0123abc"}}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	if want := "GENERATION=g-1f2e\nTEMPLATE_ID=sha256:abc\nCOMMIT=0123abc\n"; string(got) != want {
		t.Fatalf("dotenv:\n%s\nwant:\n%s", got, want)
	}
	// A line break is refused and nothing of the step is written.
	err := w.Write(Step{Outputs: []Output{{"ok", "1"}, {"notes", "two\nlines"}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "notes") {
		t.Fatalf("err = %v, want ErrInvalid naming notes", err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(after, got) {
		t.Fatalf("a refused step wrote:\n%s", after)
	}
	// GitLab takes files under 5 KB.
	err = w.Write(Step{Outputs: []Output{{"big", strings.Repeat("x", DotenvMaxBytes)}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), file) {
		t.Fatalf("err = %v, want ErrInvalid naming the file", err)
	}
}

func TestParseFormatAndDetect(t *testing.T) {
	for in, want := range map[string]Format{"": None, "none": None, "auto": Auto, "github": GitHub, "tekton": Tekton, "gitlab": GitLab} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("jenkins"); err == nil || !strings.Contains(err.Error(), "jenkins") {
		t.Errorf("ParseFormat(jenkins) err = %v", err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		env    map[string]string
		tekton string
		want   Format
	}{
		{map[string]string{"GITHUB_ACTIONS": "true"}, "", GitHub},
		{map[string]string{"GITLAB_CI": "true"}, "", GitLab},
		{nil, "/tekton/results", Tekton},
		{map[string]string{"GITHUB_ACTIONS": "false"}, "", None},
		{nil, "", None},
	}
	for _, c := range cases {
		if got := Detect(env(c.env), c.tekton); got != c.want {
			t.Errorf("Detect(%v, %q) = %q, want %q", c.env, c.tekton, got, c.want)
		}
	}
}

// TestGitLabCodeQuality: findings at a file become GitLab Code Quality
// issues with paths relative to the project, fingerprints that survive a
// line move and differ between identical findings, and an empty report is
// still [] (GitLab then shows the findings resolved).
func TestGitLabCodeQuality(t *testing.T) {
	dir := t.TempDir()
	cq := filepath.Join(dir, "gl-code-quality.json")
	w := &GitLabWriter{File: filepath.Join(dir, "slipway.env"), CodeQualityFile: cq, ProjectDir: "/builds/p"}
	finding := func(line int) Annotation {
		return Annotation{Level: Error, File: "/builds/p/deploy/app.yaml", Line: line, Col: 9, Title: "mutable image reference",
			Message: "nginx:1.25: tag without digest", Check: "slipway/mutable-image-reference"}
	}
	step := Step{Outputs: []Output{{"findings", "3"}}, Annotations: []Annotation{
		finding(4), finding(12), {Level: Warning, File: "other.yaml", Message: "m"}, {Level: Error, Message: "no file: log only"},
	}}
	if err := w.Write(step); err != nil {
		t.Fatal(err)
	}
	var got []CodeQualityIssue
	b, _ := os.ReadFile(cq)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(got) != 3 {
		t.Fatalf("%d issues, want 3 (the finding without a file stays out):\n%s", len(got), b)
	}
	g := got[0]
	if g.Description != "nginx:1.25: tag without digest" || g.CheckName != "slipway/mutable-image-reference" || g.Severity != "major" ||
		g.Location.Path != "deploy/app.yaml" || g.Location.Lines.Begin != 4 || len(g.Fingerprint) != 64 {
		t.Errorf("issue = %+v", g)
	}
	if got[1].Fingerprint == g.Fingerprint {
		t.Errorf("two identical findings share fingerprint %s", g.Fingerprint)
	}
	if got[2].CheckName != "slipway" || got[2].Severity != "minor" || got[2].Location.Path != "other.yaml" || got[2].Location.Lines.Begin != 1 {
		t.Errorf("issue = %+v", got[2])
	}
	// The same findings moved down two lines keep their fingerprints.
	moved := CodeQuality(Step{Annotations: []Annotation{finding(6), finding(14)}}, "/builds/p")
	if moved[0].Fingerprint != got[0].Fingerprint || moved[1].Fingerprint != got[1].Fingerprint {
		t.Errorf("fingerprints moved with the lines: %s %s, were %s %s", moved[0].Fingerprint, moved[1].Fingerprint, got[0].Fingerprint, got[1].Fingerprint)
	}

	// A second command of the job adds to the report; a clean one writes [].
	if err := w.Write(Step{Annotations: []Annotation{finding(20)}}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(cq)
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 4 {
		t.Fatalf("after a second step: %d issues, %v", len(got), err)
	}
	clean := filepath.Join(dir, "clean.json")
	if err := (&GitLabWriter{File: filepath.Join(dir, "e"), CodeQualityFile: clean}).Write(Step{Outputs: []Output{{"findings", "0"}}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(clean); strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("clean report = %q, want []", b)
	}

	// A report that is not an array is named, and a step refused for its
	// dotenv writes no issue either.
	if err := os.WriteFile(clean, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := (&GitLabWriter{File: filepath.Join(dir, "e"), CodeQualityFile: clean}).Write(Step{})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), clean) {
		t.Errorf("err = %v, want ErrInvalid naming %s", err, clean)
	}
	before, _ := os.ReadFile(cq)
	err = w.Write(Step{Outputs: []Output{{"notes", "a\nb"}}, Annotations: []Annotation{finding(30)}})
	if after, _ := os.ReadFile(cq); !errors.Is(err, ErrInvalid) || !bytes.Equal(before, after) {
		t.Errorf("refused step: err %v, report changed: %v", err, !bytes.Equal(before, after))
	}
}
