package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runStdin is run with the given stdin.
func runStdin(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	if dir != "" {
		t.Chdir(dir)
	}
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestPinLintStdin: - is the YAML stream on stdin (kustomize build | slipway
// pin -): lint names it <stdin> with its lines; pin prints the stream pinned
// on stdout, and only the stream, with a lock written as for files.
func TestPinLintStdin(t *testing.T) {
	_, host, d := registryWith(t, "web:v1")
	stream := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\n" + strings.ReplaceAll(deployment, "HOST", host)
	dir := t.TempDir()

	r := runStdin(t, dir, stream, "lint", "-")
	if r.code != exitFailed || !strings.Contains(r.stdout, "<stdin>:15:18: "+host+"/web:v1: ") {
		t.Fatalf("lint -: %+v", r)
	}

	r = runStdin(t, dir, stream, "pin", "--lock", "images.lock", "-")
	want := strings.Replace(stream, host+"/web:v1", host+"/web:v1@"+d["web:v1"], 1)
	if r.code != 0 || r.stdout != want || !strings.Contains(r.stderr, "<stdin>:15:18: "+host+"/web:v1 -> ") {
		t.Fatalf("pin -: %+v\nwant stdout %q", r, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "images.lock")); !strings.Contains(string(b), d["web:v1"]) {
		t.Fatalf("pin - wrote no lock: %q", b)
	}
	if r := runStdin(t, dir, want, "lint", "-"); r.code != 0 || r.stdout != "" {
		t.Fatalf("lint - of the pinned stream: %+v", r)
	}

	for _, c := range []struct {
		stdin string
		args  []string
		say   string
	}{
		{"", []string{"lint", "-"}, "<stdin>: input refused: no YAML files: it holds no YAML document"},
		{"just words\n", []string{"pin", "-"}, "<stdin>: input refused: no YAML files: 1 document, none a mapping or a list"},
		{stream, []string{"lint", "-", "deploy/"}, "- reads the YAML stream on stdin alone"},
		{stream, []string{"pin", "-", "-o", "json"}, "pin -: the pinned stream goes to stdout"},
		{"a: 1\nb: [\n", []string{"lint", "-"}, "<stdin>:2:"},
	} {
		if r := runStdin(t, dir, c.stdin, c.args...); r.code != exitUsage || !strings.Contains(r.stderr, c.say) {
			t.Errorf("%v with %q on stdin: %+v; want 2 saying %q", c.args, c.stdin, r, c.say)
		}
	}
}

// TestLintNoYAMLIsUsage: a path with no YAML is a usage error: an empty
// directory, a directory of text, a text file named explicitly. A file named
// explicitly that holds YAML is read whatever its name.
func TestLintNoYAMLIsUsage(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"text/notes.md": "just some text\n",
		"x.txt":         "hello world\n",
		"pod.conf":      "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: nginx:1.25\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		say  string
	}{
		{"empty", "it is empty"},
		{"text", "1 file not YAML"},
		{"x.txt", "x.txt: input refused: no YAML files: 1 document, none a mapping or a list"},
	} {
		if r := run(t, dir, "lint", c.path); r.code != exitUsage || !strings.Contains(r.stderr, c.say) {
			t.Errorf("lint %s: %+v; want 2 saying %q", c.path, r, c.say)
		}
	}
	if r := run(t, dir, "lint", "pod.conf"); r.code != exitFailed || !strings.Contains(r.stdout, "pod.conf:6:12: nginx:1.25") {
		t.Errorf("lint pod.conf: %+v", r)
	}
}

// TestHelpUnknownTopic: `slipway help WORD` refuses a word that names no
// command as the command would: exit 2 and the closest.
func TestHelpUnknownTopic(t *testing.T) {
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"help", "nosuchverb"}, `unknown command "nosuchverb" for "slipway"`},
		{[]string{"help", "rolout"}, `did you mean "rollout"?`},
		{[]string{"help", "rollout", "stauts"}, `unknown command "stauts" for "slipway rollout"; did you mean "status"?`},
	} {
		if r := run(t, "", c.args...); r.code != exitUsage || !strings.Contains(r.stderr, c.say) || r.stdout != "" {
			t.Errorf("slipway %v: %+v; want 2 saying %q", c.args, r, c.say)
		}
	}
	if r := run(t, "", "help", "rollout", "status"); r.code != 0 || !strings.Contains(r.stdout, "slipway rollout status") {
		t.Errorf("help rollout status: %+v", r)
	}
}
