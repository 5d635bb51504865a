package template

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const goodSpec = `apiVersion: slipway.dev/v1alpha1
kind: WorkspaceTemplate
metadata:
  name: minimal
spec:
  base: 127.0.0.1:5000/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  env: {PATH: /usr/local/bin:/usr/bin:/bin}
  workdir: /workspace
  user: "1000:1000"
  steps:
    - copy: {src: files/, dst: /opt/tools/}
    - run: ["/bin/sh", "-c", "echo hello > /opt/tools/hello"]
      network: false
      timeout: 30s
  caches:
    - path: /home/user/.cache/tool
  scrub: [/var/cache/apt/archives]
  refresh: [machine-id, ssh-host-keys]
  tests:
    - name: hello
      run: ["/bin/sh", "-c", "test -f /opt/tools/hello"]
`

func TestParseGood(t *testing.T) {
	tp, err := Parse([]byte(goodSpec))
	if err != nil {
		t.Fatal(err)
	}
	if tp.Metadata.Name != "minimal" || len(tp.Spec.Steps) != 2 || tp.Spec.Steps[1].Timeout.Seconds() != 30 ||
		tp.Spec.Steps[0].Copy.Dst != "/opt/tools/" || tp.Spec.User != "1000:1000" || !strings.HasPrefix(tp.Digest, "sha256:") {
		t.Fatalf("parsed %+v", tp)
	}
	// a test's timeout is read from YAML as from the tests label's JSON
	tp, err = Parse([]byte(strings.Replace(goodSpec, "test -f /opt/tools/hello\"]", "test -f /opt/tools/hello\"]\n      timeout: 1m30s", 1)))
	if err != nil || len(tp.Spec.Tests) != 1 || tp.Spec.Tests[0].Timeout.Duration != 90*time.Second {
		t.Fatalf("tests %+v, %v", tp.Spec.Tests, err)
	}
	// a test's timeout is text to YAML (templatemeta.Duration): a bad one
	// is refused, without a line (yaml.v3 gives none for text)
	_, err = Parse([]byte(strings.Replace(goodSpec, "test -f /opt/tools/hello\"]", "test -f /opt/tools/hello\"]\n      timeout: soon", 1)))
	if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), `"soon" is not a duration`) {
		t.Fatalf("a bad test timeout: %v", err)
	}
}

func TestParseRefusesNamingTheLine(t *testing.T) {
	for name, tc := range map[string]struct {
		from, to string
		want     string
	}{
		"unknown field":    {"  workdir: /workspace\n", "  workdir: /workspace\n  colour: red\n", "9: " + ErrSpec.Error()},
		"wrong kind":       {"kind: WorkspaceTemplate", "kind: Template", "2: kind:"},
		"bad name":         {"name: minimal", "name: Minimal_1", "4: metadata.name:"},
		"bad base":         {"base: 127.0.0.1:5000/base@", "base: NOT A REF@", "6: spec.base:"},
		"relative dst":     {"dst: /opt/tools/", "dst: opt/tools", "11: spec.steps[0].copy.dst:"},
		"escaping src":     {"src: files/", "src: ../secrets", "11: spec.steps[0].copy.src:"},
		"absolute src":     {"src: files/", "src: /etc", "11: spec.steps[0].copy.src:"},
		"copy and run":     {"- copy: {src: files/, dst: /opt/tools/}", "- copy: {src: files/, dst: /opt/tools/}\n      run: [true]", "11: spec.steps[0]:"},
		"empty step":       {"    - copy: {src: files/, dst: /opt/tools/}\n", "    - name: nothing\n", "11: spec.steps[0]:"},
		"bad duration":     {"timeout: 30s", "timeout: soon", "14: "},
		"bad user":         {`user: "1000:1000"`, "user: alice", "9: spec.user:"},
		"unknown refresh":  {"refresh: [machine-id, ssh-host-keys]", "refresh: [machine-id, hostname]", "18: spec.refresh[1]:"},
		"test without run": {`      run: ["/bin/sh", "-c", "test -f /opt/tools/hello"]`, "      timeout: 5s", "20: spec.tests[0].run:"},
		"relative workdir": {"workdir: /workspace", "workdir: workspace", "8: spec.workdir:"},
		"bad env":          {"env: {PATH: /usr/local/bin:/usr/bin:/bin}", "env: {1PATH: x}", "7: spec.env:"},
		"two documents":    {"", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(goodSpec, tc.from, tc.to, 1)
			if name == "two documents" {
				doc = goodSpec + "---\nkind: x\n"
				tc.want = "22: "
			}
			if doc == goodSpec {
				t.Fatalf("replacement %q did not apply", tc.from)
			}
			_, err := Parse([]byte(doc))
			if !errors.Is(err, ErrSpec) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestLoadNamesFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "template.yaml")
	os.WriteFile(file, []byte(strings.Replace(goodSpec, "user: \"1000:1000\"", "user: root", 1)), 0o644)
	_, err := Load(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":9: spec.user:") {
		t.Fatalf("err = %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, make([]byte, MaxSpecSize+1), 0o644)
	if _, err := Load(big); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("big: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte("apiVersion: slipway.dev/v1alpha1\nkind: WorkspaceTemplate\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tp, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("error outside ErrSpec: %v", err)
			}
			return
		}
		if tp.Metadata.Name == "" || tp.Spec.Base == "" {
			t.Fatalf("accepted a spec without name or base: %q", b)
		}
	})
}
