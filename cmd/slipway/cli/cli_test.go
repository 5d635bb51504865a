package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slipway-dev/slipway/internal/version"
	"github.com/slipway-dev/slipway/pkg/api/templatemeta"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/release/pin"
)

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, dir string, args ...string) result {
	t.Helper()
	if dir != "" {
		t.Chdir(dir)
	}
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// registryWith starts go-containerregistry's registry and pushes random images; it returns host and digests by repo:tag.
func registryWith(t *testing.T, repoTags ...string) (*httptest.Server, string, map[string]string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	digests := map[string]string{}
	for _, rt := range repoTags {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		repo, _, _ := strings.Cut(rt, ":")
		if img, err = withKindLabels(img, repo); err != nil {
			t.Fatal(err)
		}
		tag, _ := name.NewTag(host + "/" + rt)
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		digests[rt] = d.String()
	}
	return srv, host, digests
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const deployment = `# a comment that must survive
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
        - name: web
          image: HOST/web:v1
          imagePullPolicy: Always
`

func TestVersion(t *testing.T) {
	r := run(t, "", "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "slipway ") {
		t.Fatalf("%+v", r)
	}
	r = run(t, "", "version", "-o", "json")
	var v version.Info
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.GoVersion == "" || !v.Untagged {
		t.Fatalf("%+v", r)
	}
	if r := run(t, "", "version", "-o", "xml"); r.code != 2 {
		t.Fatalf("bad --output accepted: %+v", r)
	}
	// --version on the root prints what the verb prints, in either format.
	for _, o := range []string{"text", "json"} {
		verb, flag := run(t, "", "version", "-o", o), run(t, "", "--version", "-o", o)
		if flag.code != 0 || flag.stdout != verb.stdout {
			t.Errorf("-o %s: --version printed %+v, version printed %q", o, flag, verb.stdout)
		}
	}
	// A test binary carries no tag: it says so.
	if r := run(t, "", "--version"); !strings.Contains(r.stdout, "(untagged, ") {
		t.Errorf("untagged build not said: %q", r.stdout)
	}
}

func TestResolve(t *testing.T) {
	_, host, d := registryWith(t, "web:v1", "api:v2")
	r := run(t, "", "resolve", host+"/web:v1", host+"/api:v2")
	want := host + "/web:v1@" + d["web:v1"] + "\n" + host + "/api:v2@" + d["api:v2"] + "\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("%+v\nwant %s", r, want)
	}
	r = run(t, "", "resolve", "--drop-tag", host+"/web:v1")
	if r.stdout != host+"/web@"+d["web:v1"]+"\n" {
		t.Fatalf("--drop-tag: %+v", r)
	}
	r = run(t, "", "resolve", host+"/web:v1", host+"/web:nope")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, host+"/web:nope") || !strings.Contains(r.stderr, "tag nope not found in "+host+"/web") {
		t.Fatalf("unknown tag: %+v", r)
	}
	if r := run(t, "", "resolve", "Bad:Ref"); r.code != 2 || !strings.Contains(r.stderr, "Bad:Ref") {
		t.Fatalf("malformed: %+v", r)
	}
	if r := run(t, "", "resolve"); r.code != 2 {
		t.Fatalf("no args: %+v", r)
	}
}

func TestPinLintLoop(t *testing.T) {
	srv, host, d := registryWith(t, "web:v1")
	dir := writeTree(t, map[string]string{"deploy/web.yaml": strings.ReplaceAll(deployment, "HOST", host)})
	file := filepath.Join(dir, "deploy", "web.yaml")
	before := read(t, file)

	r := run(t, dir, "lint", "deploy")
	if r.code != 1 || !strings.Contains(r.stdout, "deploy/web.yaml:10:18: "+host+"/web:v1: ") || !strings.Contains(r.stdout, "Always") {
		t.Fatalf("lint before: %+v", r)
	}

	r = run(t, dir, "pin", "--lock", "images.lock", "deploy")
	if r.code != 0 || !strings.Contains(r.stdout, "-> "+host+"/web:v1@"+d["web:v1"]) || read(t, file) != before {
		t.Fatalf("dry run wrote or failed: %+v", r)
	}
	if !strings.Contains(read(t, filepath.Join(dir, "images.lock")), "resolved: "+host+"/web:v1@"+d["web:v1"]) {
		t.Fatal("dry run did not write the lock")
	}

	r = run(t, dir, "pin", "--write", "--lock", "images.lock", "deploy")
	after := read(t, file)
	if r.code != 0 || after != strings.Replace(before, host+"/web:v1", host+"/web:v1@"+d["web:v1"], 1) {
		t.Fatalf("pin --write: %+v\n%s", r, after)
	}
	if r := run(t, dir, "lint", "deploy"); r.code != 0 || r.stdout != "" {
		t.Fatalf("lint after: %+v", r)
	}

	// Hermetic: the registry is gone; the lock answers, and a reference it lacks fails by name.
	srv.Close()
	if r := run(t, dir, "pin", "--write", "--refresh", "--hermetic", "--lock", "images.lock", "deploy"); r.code != 0 || read(t, file) != after {
		t.Fatalf("hermetic refresh: %+v", r)
	}
	os.WriteFile(filepath.Join(dir, "deploy", "new.yaml"), []byte(strings.ReplaceAll(deployment, "HOST/web:v1", host+"/other:v3")), 0o644)
	r = run(t, dir, "pin", "--write", "--hermetic", "--lock", "images.lock", "deploy")
	if r.code != 1 || !strings.Contains(r.stderr, host+"/other:v3") || !strings.Contains(r.stderr, "not in lock") {
		t.Fatalf("hermetic missing: %+v", r)
	}
	if r := run(t, dir, "pin", "--hermetic", "deploy"); r.code != 2 || !strings.Contains(r.stderr, "--lock") {
		t.Fatalf("--hermetic without --lock: %+v", r)
	}
}

func TestPinRegistryDownWritesNothing(t *testing.T) {
	srv, host, _ := registryWith(t, "web:v1")
	dir := writeTree(t, map[string]string{"a.yaml": strings.ReplaceAll(deployment, "HOST", host)})
	before := read(t, filepath.Join(dir, "a.yaml"))
	srv.Close()
	r := run(t, dir, "pin", "--write", ".")
	if r.code != 1 || !strings.Contains(r.stderr, "nothing written") || !strings.Contains(r.stderr, "a.yaml:10:18") {
		t.Fatalf("%+v", r)
	}
	if read(t, filepath.Join(dir, "a.yaml")) != before {
		t.Fatal("file changed although resolution failed")
	}
}

// TestPinKustomizePlaceholder is the case of issue 12 item 13: the images
// entry that renames the placeholder runner gets the digest; the placeholder
// is never resolved (it would be docker.io/library/runner:latest).
func TestPinKustomizePlaceholder(t *testing.T) {
	_, host, d := registryWith(t, "platform/runner:0.9.1")
	kust := "resources:\n- deployment.yaml\nimages:\n- name: runner\n  newName: " + host + "/platform/runner\n  newTag: \"0.9.1\"\n"
	dep := strings.ReplaceAll(deployment, "HOST/web:v1", "runner")
	dir := writeTree(t, map[string]string{"deploy/kustomization.yaml": kust, "deploy/deployment.yaml": dep})
	r := run(t, dir, "lint", "deploy")
	if r.code != 1 || r.stdout != "deploy/kustomization.yaml:4:3: "+host+"/platform/runner:0.9.1: "+pin.ReasonKustomize+"\n" {
		t.Fatalf("lint before: %+v", r)
	}
	r = run(t, dir, "pin", "--write", "deploy")
	if r.code != 0 || read(t, filepath.Join(dir, "deploy", "kustomization.yaml")) != kust+"  digest: "+d["platform/runner:0.9.1"]+"\n" ||
		read(t, filepath.Join(dir, "deploy", "deployment.yaml")) != dep {
		t.Fatalf("pin: %+v", r)
	}
	r = run(t, dir, "lint", "deploy")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "1 image reference in 2 files (2 documents): 1 by known kind\nall 1 pinned by digest\nnot counted: 1 kustomize placeholder") {
		t.Fatalf("lint after: %+v", r)
	}
}

func TestBadInputNamesThePlace(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"bad-ref.yaml": strings.ReplaceAll(deployment, "HOST/web:v1", "Not A Ref"),
		"bad.yaml":     "apiVersion: v1\nkind: Pod\nspec: [\n",
	})
	r := run(t, dir, "lint", "bad-ref.yaml")
	if r.code != 1 || !strings.Contains(r.stdout, "bad-ref.yaml:10:18") {
		t.Fatalf("malformed ref in lint: %+v", r)
	}
	r = run(t, dir, "pin", "bad-ref.yaml")
	if r.code != 1 || !strings.Contains(r.stderr, "bad-ref.yaml:10:18") {
		t.Fatalf("malformed ref in pin: %+v", r)
	}
	r = run(t, dir, "lint", "bad.yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "bad.yaml:") {
		t.Fatalf("unparsable YAML: %+v", r)
	}
	if r := run(t, dir, "lint", "missing.yaml"); r.code != 2 || !strings.Contains(r.stderr, "missing.yaml") {
		t.Fatalf("missing file: %+v", r)
	}
}

func TestJSONOutput(t *testing.T) {
	_, host, d := registryWith(t, "web:v1")
	dir := writeTree(t, map[string]string{"a.yaml": strings.ReplaceAll(deployment, "HOST", host)})
	r := run(t, dir, "lint", "-o", "json", ".")
	var lr lintReport
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &lr) != nil || len(lr.Findings) != 1 || lr.Findings[0].Line != 10 {
		t.Fatalf("lint json: %+v", r)
	}
	r = run(t, dir, "pin", "-o", "json", ".")
	var pr struct {
		Files []struct {
			Path    string `json:"path"`
			Status  string `json:"status"`
			Changes []struct {
				Line int    `json:"line"`
				To   string `json:"to"`
			} `json:"changes"`
		} `json:"files"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &pr) != nil || len(pr.Files) != 1 || pr.Files[0].Status != "changed" ||
		pr.Files[0].Changes[0].To != host+"/web:v1@"+d["web:v1"] {
		t.Fatalf("pin json: %+v", r)
	}
	r = run(t, "", "resolve", "-o", "json", host+"/web:v1")
	if r.code != 0 || !strings.Contains(r.stdout, `"digest": "`+d["web:v1"]+`"`) {
		t.Fatalf("resolve json: %+v", r)
	}
}

// kindLabels are the config labels that make a test image what its
// repository says it is (generation create refuses a runner pin without the
// runner's, a template pin without the template's).
func withKindLabels(img v1.Image, repo string) (v1.Image, error) {
	labels := map[string]string{}
	switch {
	case strings.Contains(repo, "runner"):
		labels[sandbox.LabelRunnerSHA256] = strings.Repeat("0", 64)
	case strings.HasPrefix(repo, "templates/"):
		labels[templatemeta.LabelSpecDigest] = "sha256:" + strings.Repeat("0", 64)
	default:
		return img, nil
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}
