package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
)

// One sandbox, and everything the issue asks to hold inside it.
func TestSandbox(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	img := templateImage(t, "", "machine-id,ssh-host-keys,random-seed")
	spec := specFor(t, img)
	spec.Env = map[string]string{"SECRET_NAME": "value"}
	s := create(t, b, spec)
	ctx := context.Background()

	if s.State != sandbox.StateRunning || s.Pool != "default" || s.Generation != spec.Generation || s.Owner != sandbox.OwnerWarm || s.TemplateID != spec.TemplateID || s.Workdir != "/workspace" {
		t.Fatalf("sandbox = %+v", s)
	}

	t.Run("identity", func(t *testing.T) {
		id, err := s.Identity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := runner.FileDigest(fixtures.runner.Path)
		if err != nil {
			t.Fatal(err)
		}
		if id.RunnerBinarySHA256 != want || id.Generation != spec.Generation || id.SandboxID != s.ID || id.ProtocolVersion != runner.ProtocolVersion {
			t.Errorf("identity = %+v, want digest %s", id, want)
		}
		if _, err := s.Ping(ctx); err != nil {
			t.Error(err)
		}
	})

	t.Run("exec", func(t *testing.T) {
		var out bytes.Buffer
		st, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"echo", "hi"}}, &out, &out)
		if err != nil || st.ExitCode != 0 || out.String() != "hi\n" {
			t.Fatalf("echo hi: %+v %v %q", st, err, out.String())
		}
		if stdout, stderr, code := sh(t, s, "echo out; echo err >&2; exit 7"); stdout != "out\n" || stderr != "err\n" || code != 7 {
			t.Errorf("got %q %q %d", stdout, stderr, code)
		}
		if stdout, _, _ := sh(t, s, `echo "$GREETING $SECRET_NAME $HOME $(pwd) $(hostname)"`); stdout != "hello value /workspace /workspace "+s.ID+"\n" {
			t.Errorf("environment: %q", stdout)
		}
		out.Reset()
		st, err = s.Exec(ctx, runner.ExecRequest{Argv: []string{"sh", "-c", "yes | head -c 100000"}, MaxOutput: 1000}, &out, &out)
		if err != nil || !st.Truncated || st.OutputBytes != 100000 || out.Len() != 1000 {
			t.Errorf("truncation: %+v %v, %d bytes streamed", st, err, out.Len())
		}
		st, err = s.Exec(ctx, runner.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutMs: 200}, nil, nil)
		if err != nil || !st.TimedOut || st.Signal != "terminated" || st.Stop != runner.StopTerminated || st.DurationMs > 5000 {
			t.Errorf("timeout: %+v %v", st, err)
		}
		if _, err := s.Exec(ctx, runner.ExecRequest{Argv: []string{"no-such-command"}}, nil, nil); !errors.Is(err, runner.ErrStart) {
			t.Errorf("missing command: %v, want ErrStart", err)
		}
	})

	t.Run("no network", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
				accepted <- struct{}{}
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		stdout, stderr, code := sh(t, s, fmt.Sprintf("echo hi | nc -w 2 127.0.0.1 %d; echo nc=$?; cat /proc/net/dev", port))
		if code != 0 || !strings.Contains(stdout, "nc=1") {
			t.Errorf("nc to the host's 127.0.0.1:%d: %q %q", port, stdout, stderr)
		}
		var ifaces []string
		for _, line := range strings.Split(stdout, "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
				ifaces = append(ifaces, strings.TrimSpace(name))
			}
		}
		if len(ifaces) != 1 || ifaces[0] != "lo" {
			t.Errorf("interfaces %v, want only lo", ifaces)
		}
		select {
		case <-accepted:
			t.Error("the host's listener got a connection from the sandbox")
		default:
		}
	})

	t.Run("host processes invisible", func(t *testing.T) {
		stdout, _, _ := sh(t, s, `for p in /proc/[0-9]*; do echo "${p#/proc/} $(cat $p/comm)"; done`)
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue // a process that ended while listed
			}
			switch f[1] {
			case "bwrap", "slipway-runner", "sh", "cat":
			default:
				t.Errorf("a process outside the sandbox is visible: %q", line)
			}
		}
		if !strings.Contains(stdout, "1 bwrap") || !strings.Contains(stdout, "slipway-runner") {
			t.Errorf("processes:\n%s", stdout)
		}
	})

	t.Run("writes outside the workspace fail", func(t *testing.T) {
		for _, p := range []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/etc/machine-id", "/workspace/../etc/y"} {
			if _, stderr, code := sh(t, s, "echo x > "+p); code == 0 || !strings.Contains(stderr, "Read-only file system") {
				t.Errorf("writing %s: exit %d, %q", p, code, stderr)
			}
		}
		if _, stderr, code := sh(t, s, "echo data > /workspace/file && mkdir -p /workspace/d/e && echo t > /tmp/t"); code != 0 {
			t.Fatalf("writing the workspace: %s", stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "sandboxes", s.ID, "workspace", "file"))
		if err != nil || string(b) != "data\n" {
			t.Errorf("the workspace file on the host: %q %v", b, err)
		}
	})

	t.Run("runner read-only", func(t *testing.T) {
		for _, script := range []string{
			"echo x >> " + sandbox.RunnerPath,
			"rm -f " + sandbox.RunnerPath,
			"chmod 777 " + sandbox.RunnerPath,
		} {
			if _, stderr, code := sh(t, s, script); code == 0 {
				t.Errorf("%s succeeded: %q", script, stderr)
			}
		}
		stdout, _, _ := sh(t, s, "sha256sum "+sandbox.RunnerPath)
		if !strings.HasPrefix("sha256:"+stdout, fixtures.runner.Digest) {
			t.Errorf("runner in the sandbox: %q, want %s", stdout, fixtures.runner.Digest)
		}
	})

	t.Run("refresh", func(t *testing.T) {
		mid, _, _ := sh(t, s, "cat /etc/machine-id")
		if !regexp.MustCompile(`^[0-9a-f]{32}\n$`).MatchString(mid) {
			t.Errorf("machine-id %q", mid)
		}
		kinds := map[string]sandbox.RefreshResult{}
		for _, r := range s.Refresh {
			kinds[r.Kind] = r
		}
		if !kinds["machine-id"].Done {
			t.Errorf("refresh = %+v", s.Refresh)
		}
		if r := kinds["random-seed"]; r.Done || !strings.Contains(r.Detail, "nothing to refresh") {
			t.Errorf("random-seed of a template without one: %+v", r)
		}
		if !haveSSHKeygen() {
			t.Log("no ssh-keygen on the host to put in the template: host keys not tested")
			return
		}
		keys, stderr, code := sh(t, s, "cat /etc/ssh/ssh_host_ed25519_key.pub && ls /etc/ssh && touch /etc/ssh/x")
		if !strings.HasPrefix(keys, "ssh-ed25519 ") || code == 0 || !strings.Contains(stderr, "Read-only") {
			t.Errorf("host keys: %q %q exit %d", keys, stderr, code)
		}
		if r := kinds["ssh-host-keys"]; !r.Done || !strings.Contains(r.Detail, "ssh-ed25519 SHA256:") {
			t.Errorf("ssh refresh result = %+v", r)
		}
	})

	t.Run("limits and durable state", func(t *testing.T) {
		got, err := b.List(ctx, sandbox.Filter{Pool: "default"})
		if err != nil || len(got) != 1 || got[0].ID != s.ID || got[0].State != sandbox.StateRunning {
			t.Fatalf("List = %v %v", got, err)
		}
		if got, _ := b.List(ctx, sandbox.Filter{Pool: "other"}); len(got) != 0 {
			t.Errorf("List(other pool) = %v", got)
		}
		rec, err := os.ReadFile(filepath.Join(dir, "sandboxes", s.ID, "sandbox.json"))
		if err != nil || bytes.Contains(rec, []byte("value")) {
			t.Errorf("sandbox.json: %v, must not hold environment values:\n%s", err, rec)
		}
	})
}

// A sandbox per pool member: the template is unpacked once, each gets its
// own machine id, host keys and workspace.
func TestTemplateSharedOnce(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	spec := specFor(t, templateImage(t, "", "machine-id,ssh-host-keys"))
	var wg sync.WaitGroup
	sbs := make([]*sandbox.Sandbox, 2)
	for i := range sbs {
		wg.Go(func() { sbs[i] = create(t, b, spec) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := local.Extractions(b); n != 1 {
		t.Errorf("template extracted %d times, want 1", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "templates")); len(ents) != 1 {
		t.Errorf("templates/ holds %d entries", len(ents))
	}
	seen := map[string]bool{}
	for _, s := range sbs {
		out, _, _ := sh(t, s, "cat /etc/machine-id /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null; echo mine > /workspace/who; ls /workspace")
		if seen[out] {
			t.Errorf("two sandboxes share machine id or host key:\n%s", out)
		}
		seen[out] = true
	}
	// The template's own files did not change.
	if b, err := os.ReadFile(filepath.Join(dir, "templates", strings.TrimPrefix(spec.TemplateID, "sha256:"), "rootfs", "etc", "machine-id")); err != nil || len(b) != 0 {
		t.Errorf("the shared template's machine-id: %q %v", b, err)
	}
	create(t, b, spec)
	if n := local.Extractions(b); n != 1 {
		t.Errorf("template extracted %d times after a third sandbox, want 1", n)
	}
}

func TestDeleteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	s := create(t, b, specFor(t, templateImage(t, "", "machine-id")))
	if len(bwrapProcesses(t, s.ID)) == 0 {
		t.Fatal("no bwrap process found for a running sandbox")
	}
	// Leftovers sees the running sandbox's folder and processes ...
	if left, err := b.Leftovers(context.Background(), s.ID); err != nil || len(left) < 2 || !strings.HasPrefix(left[0], "folder ") || !strings.Contains(strings.Join(left, "\n"), "process ") {
		t.Errorf("leftovers of a running sandbox: %q %v", left, err)
	}
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	// ... and nothing once it is deleted.
	if left, err := b.Leftovers(context.Background(), s.ID); err != nil || len(left) != 0 {
		t.Errorf("leftovers after delete: %q %v", left, err)
	}
	if p := bwrapProcesses(t, s.ID); len(p) != 0 {
		t.Errorf("bwrap processes left: %v", p)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandboxes", s.ID)); !os.IsNotExist(err) {
		t.Errorf("sandbox directory left: %v", err)
	}
	if err := b.Delete(context.Background(), s.ID); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if _, err := s.Ping(context.Background()); !errors.Is(err, runner.ErrUnavailable) {
		t.Errorf("ping after delete: %v", err)
	}
	_ = time.Second
}
