package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push writes img to ref and returns ref's repository @ digest.
func push(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return tag.Context().String() + "@" + d.String()
}

// TestRuntimeServeAndClaim runs the whole loop through the CLI: a
// generation of a real runner and a busybox template is promoted into a
// config repository, `runtime serve` (a separate process) follows it and
// keeps warm sandboxes, `claim` runs a command, `runs show` prints its
// manifest.
func TestRuntimeServeAndClaim(t *testing.T) {
	repo, runnerRef := runtimeConfigRepo(t)
	dir := t.TempDir()
	gen := filepath.Join(dir, "g1.yaml") // a file of many lines, refused as a token file below
	if err := os.WriteFile(gen, []byte("apiVersion: slipway.dev/v1alpha1\nkind: Generation\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("runtime-test-token-0123456789\n"), 0o600)
	state := filepath.Join(dir, "state")
	self, _ := os.Executable()
	srv := exec.Command(self, "runtime", "serve", "--config-repo", repo, "--state", state, "--listen", "127.0.0.1:0",
		"--token-file", tokenFile, "--insecure-skip-verify", "--sync-interval", "200ms")
	srv.Env = append(os.Environ(), envRunMain+"=1")
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				addr <- a
			}
			t.Log("serve: " + sc.Text())
		}
	}()
	var server string
	select {
	case a := <-addr:
		server = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("runtime serve did not start")
	}

	var res struct {
		RunID, SandboxID, Generation, Output string
		Warm                                 bool
		ExitCode                             int
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run(t, "", "claim", "--server", server, "--token-file", tokenFile, "--pool", "agents", "--tenant", "acme", "--", "sh", "-c", "echo hello from $(cat /etc/hostname 2>/dev/null || echo sandbox)")
		if r.code == 0 {
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("claim output: %v\n%s", err, r.stdout)
			}
			if res.Warm || time.Now().After(deadline) {
				break
			}
			continue // a cold start before the pool was warm: claim again
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(res.Output, "hello from") || res.ExitCode != 0 || !strings.HasPrefix(res.RunID, "r-") {
		t.Fatalf("claim result %+v", res)
	}
	r := run(t, "", "runs", "show", res.RunID, "--state", state)
	var m map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil || m["generation"] != res.Generation || m["status"] != "completed" || m["tenant"] != "acme" {
		t.Fatalf("runs show: %+v", r)
	}
	if img, _ := m["runner_image_digest"].(string); img == "" || !strings.HasSuffix(runnerRef, img) {
		t.Errorf("runner_image_digest %v, want the pinned %s", m["runner_image_digest"], runnerRef)
	}
	if bin, _ := m["runner_binary_sha256"].(string); !strings.HasPrefix(bin, "sha256:") || strings.HasSuffix(runnerRef, bin) {
		t.Errorf("runner_binary_sha256 %v, want the runner binary's sha256, not the image's digest", m["runner_binary_sha256"])
	}
	// verification is skipped here (--insecure-skip-verify, no policy in
	// the repository): no policy revision to record
	if v, ok := m["verification_policy_revision"]; !ok || v != "" || m["policy_revision"] != "" {
		t.Errorf("policy_revision %v, verification_policy_revision %v", m["policy_revision"], m["verification_policy_revision"])
	}
	// The same answers from the runtime's API.
	r = run(t, "", "runs", "show", res.RunID, "--server", server, "--token-file", tokenFile)
	var m2 map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m2) != nil || m2["run_id"] != res.RunID || m2["status"] != "completed" {
		t.Fatalf("runs show --server: %+v", r)
	}
	tid, _ := m["workspace_template_id"].(string)
	for _, src := range [][]string{{"--state", state}, {"--server", server, "--token-file", tokenFile}} {
		r = run(t, "", append([]string{"runs", "query", "--template", tid}, src...)...)
		if r.code != 0 || !slices.Contains(strings.Fields(r.stdout), res.RunID) {
			t.Errorf("runs query --template %s %v: %+v", tid, src[0], r)
		}
		if r = run(t, "", append([]string{"runs", "query", "--package", "nope"}, src...)...); r.code != 2 || !strings.Contains(r.stderr, "name@version") {
			t.Errorf("runs query --package nope %v: %+v", src[0], r)
		}
	}
	// A unique prefix of the run's id, from the state or the API; one that
	// matches nothing says so.
	for _, src := range [][]string{{"--state", state}, {"--server", server, "--token-file", tokenFile}} {
		r = run(t, "", append([]string{"runs", "show", res.RunID[:9]}, src...)...)
		if r.code != 0 || !strings.Contains(r.stdout, `"run_id": "`+res.RunID+`"`) {
			t.Errorf("runs show PREFIX %v: %+v", src[0], r)
		}
		if r = run(t, "", append([]string{"runs", "show", "r-zzzzzzzz"}, src...)...); r.code != 1 || !strings.Contains(r.stderr, "no run matches r-zzzzzzzz in the run manifests") {
			t.Errorf("runs show of an unknown prefix %v: %+v", src[0], r)
		}
	}
	if r = run(t, "", "runs", "show", "r-404", "--server", server, "--token-file", tokenFile); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("runs show --server of an unknown run: %+v", r)
	}
	wrong := filepath.Join(dir, "wrong-token")
	os.WriteFile(wrong, []byte("not-the-runtime-token-at-all\n"), 0o600)
	if r := run(t, "", "claim", "--server", server, "--token-file", wrong, "--pool", "agents", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("a wrong token: %+v", r)
	}
	if r := run(t, "", "claim", "--server", server, "--token-file", gen, "--pool", "agents", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "one line") {
		t.Errorf("a token file of many lines: %+v", r)
	}
}
