package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// maxREADMELines bounds the README: a front door (what Slipway is, install,
// a quick start, the set-up commands, a map of docs/); reference material
// belongs in docs/.
const maxREADMELines = 250

func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= maxREADMELines {
		t.Errorf("README.md has %d lines, the bound is < %d: move reference material into docs/", n, maxREADMELines)
	}
}

// quickStartMarker opens the README's quick start: the next fenced sh block
// is run as a script by TestQuickStart.
const quickStartMarker = "<!-- quickstart:"

// quickStartRegistry is the registry address the quick start names; the test
// puts a free port in its place, so runs in parallel do not collide.
const quickStartRegistry = "127.0.0.1:5000"

// quickStartScript returns the README's quick start block.
func quickStartScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), quickStartMarker)
	if !ok {
		t.Fatal("README.md has no quick start block (" + quickStartMarker + " ...)")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(block, "\n```\n")
	if !ok || !ok2 || strings.TrimSpace(block) == "" {
		t.Fatal("README.md: the quick start marker is not followed by a fenced sh block")
	}
	return block + "\n"
}

// TestQuickStart runs the README's quick start, as written, in an empty
// directory with slipway and crane on PATH: it fails when any command of it
// fails, so the quick start cannot rot. slipway is $SLIPWAY_BIN when set
// (make test builds it just before), else built here; crane is $CRANE when
// it exists, else built from tools/go.mod.
func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := quickStartScript(t)
	if !strings.Contains(script, quickStartRegistry) {
		t.Fatalf("the quick start no longer names %s: change quickStartRegistry with it", quickStartRegistry)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	linkOrBuild(t, os.Getenv("SLIPWAY_BIN"), filepath.Join(bin, "slipway"), ".", ".")
	linkOrBuild(t, os.Getenv("CRANE"), filepath.Join(bin, "crane"), "../../tools", "github.com/google/go-containerregistry/cmd/crane")
	built := time.Since(start)

	script = strings.ReplaceAll(script, quickStartRegistry, freeLoopbackAddr(t))
	if err := os.WriteFile(filepath.Join(tmp, "quickstart.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", filepath.Join(tmp, "quickstart.sh"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+tmp)
	// Output to a file, not a pipe: what the script leaves running in the
	// background (the registry, when a command fails before the script stops
	// it) would hold a pipe open. Its own process group, so that goes with it.
	log, err := os.Create(filepath.Join(tmp, "quickstart.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	run := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out, _ := os.ReadFile(log.Name())
	if err != nil {
		t.Fatalf("the README's quick start failed: %v\n%s", err, out)
	}
	t.Logf("quick start ran in %s (binaries ready in %s)", time.Since(run).Round(time.Millisecond), built.Round(time.Millisecond))
	for _, want := range []string{"@sha256:", "all 1 pinned by digest", "verified "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the quick start's output does not say %q:\n%s", want, out)
		}
	}
}

// linkOrBuild puts a program at dst: a link to prebuilt when that file
// exists, else go build of pkg in dir.
func linkOrBuild(t *testing.T, prebuilt, dst, dir, pkg string) {
	t.Helper()
	if prebuilt != "" {
		if fi, err := os.Stat(prebuilt); err == nil && !fi.IsDir() {
			if err := os.Symlink(prebuilt, dst); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	// -s -w: no symbol tables or DWARF, which halves the link of slipway
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", dst, pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
}

// freeLoopbackAddr returns 127.0.0.1:PORT with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// mdLink is a markdown link or image: its target up to the closing
// parenthesis (a title after a space is cut off).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestDocsLinksResolve checks every relative link of README.md and docs/:
// the file (or folder) exists, and a #fragment into a markdown file names one
// of its headings.
func TestDocsLinksResolve(t *testing.T) {
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, target := range markdownLinks(string(b)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			dst := f
			if path != "" {
				dst = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(dst); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, target)
				continue
			}
			if frag != "" && strings.HasSuffix(dst, ".md") {
				if !hasAnchor(t, dst, frag) {
					t.Errorf("%s links to %s: no heading of %s has the anchor #%s", name, target, filepath.Base(dst), frag)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links checked: the link pattern no longer matches", checked)
	}
}

// markdownLinks returns the link targets of a markdown text, outside fenced
// code blocks and inline code.
func markdownLinks(s string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// drop inline code spans: `a](b)` is text, not a link
		parts := strings.Split(line, "`")
		var text strings.Builder
		for i := 0; i < len(parts); i += 2 {
			text.WriteString(parts[i])
			text.WriteString(" ")
		}
		for _, m := range mdLink.FindAllStringSubmatch(text.String(), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// hasAnchor says whether a heading of the markdown file at p has GitHub's
// anchor frag: lower case, punctuation dropped, spaces as hyphens.
func hasAnchor(t *testing.T, p, frag string) bool {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		if slug(strings.TrimLeft(line, "# ")) == frag {
			return true
		}
	}
	return false
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
