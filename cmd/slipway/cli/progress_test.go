package cli

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a child process's output and the test can
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rolloutToNowhere is a config repository with pool agents (g1 active, g2
// promoted) and the arguments that roll g2 out, --server left out.
func rolloutToNowhere(t *testing.T) []string {
	t.Helper()
	_, host, digests := registryWith(t, "platform/cp:v1", "platform/runner:v1", "templates/tools:v1", "platform/cp:v2")
	dir := t.TempDir()
	repo := filepath.Join(dir, "config.git")
	if r := run(t, "", "config", "init", repo, "--pool", "agents"); r.code != 0 {
		t.Fatal(r)
	}
	pin := func(kind, rt string) []string {
		repo, _, _ := strings.Cut(rt, ":")
		return []string{"--pin", kind + "=" + host + "/" + repo + "@" + digests[rt]}
	}
	g1, g2 := filepath.Join(dir, "g1.yaml"), filepath.Join(dir, "g2.yaml")
	args := append([]string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--out-file", g1,
		"--control-plane-protocol", "1", "--runner-protocol", "1"}, append(append(pin("controlPlane", "platform/cp:v1"), pin("runner", "platform/runner:v1")...), pin("workspaceTemplate", "templates/tools:v1")...)...)
	if r := run(t, "", args...); r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g1, "--activate", "--insecure-skip-verify"); r.code != 0 {
		t.Fatal(r)
	}
	r := run(t, "", append([]string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--out-file", g2, "--from", g1}, pin("controlPlane", "platform/cp:v2")...)...)
	if r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", g2, "--insecure-skip-verify"); r.code != 0 {
		t.Fatal(r)
	}
	return []string{"rollout", "start", "--repo", repo, "--pool", "agents", "--to", strings.TrimSpace(r.stdout), "--wait", "--unsigned-evidence", "--token-file", writeToken(t, dir)}
}

func writeToken(t *testing.T, dir string) string {
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte("progress-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// slipwayUntil runs the CLI as a process of its own until its stderr
// satisfies done (or limit passes), then interrupts it, and returns its
// stderr.
func slipwayUntil(t *testing.T, limit time.Duration, done func(stderr string) bool, env []string, args ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(append(os.Environ(), envRunMain+"=1"), env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(limit); time.Now().Before(end) && !done(stderr.String()); {
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	return stderr.String()
}

// TestRolloutProgressUnansweredFleet: a rollout waiting on a runtime that
// accepts connections and never answers says so within a few seconds, and
// keeps saying what it waits for and the time left; on one that refuses
// connections it shows the fleet's last error. Without a terminal, auto
// shows nothing.
func TestRolloutProgressUnansweredFleet(t *testing.T) {
	base := rolloutToNowhere(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel's backlog), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()

	unanswered := func(out string) []string {
		var ls []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "step 1/7 compatibility: waiting for the fleet to say which protocols its control plane speaks; deadline in ") &&
				strings.Contains(l, "the fleet has not answered for ") {
				ls = append(ls, l)
			}
		}
		return ls
	}
	// The first "has not answered" comes 2s into the wait; within 4s of it
	// the line has been said again.
	var firstAt time.Time
	out := slipwayUntil(t, 60*time.Second, func(out string) bool {
		n := len(unanswered(out))
		if n > 0 && firstAt.IsZero() {
			firstAt = time.Now()
		}
		return n >= 3 || (!firstAt.IsZero() && time.Since(firstAt) > 4*time.Second)
	}, []string{"CI="}, append(base, "--server", "http://"+silent.Addr().String(), "--progress", "always")...)
	t.Logf("stderr:\n%s", out)
	if len(unanswered(out)) < 3 {
		t.Errorf("want the wait said again and again (the fleet has not answered for ...), got:\n%s", out)
	}

	// The rollout is in progress: resume drives it (the first driver is gone).
	resume := append([]string{"rollout", "resume"}, withoutToAndWait(base[2:])...)
	out = slipwayUntil(t, 30*time.Second, func(out string) bool { return strings.Contains(out, "connection refused") },
		[]string{"CI="}, append(resume, "--server", "http://"+refusedAddr, "--progress", "always", "--poll", "200ms")...)
	if !strings.Contains(out, "step 1/7 compatibility: waiting for ") || !strings.Contains(out, "the fleet's last error: the fleet did not answer: ") || !strings.Contains(out, "connection refused") {
		t.Errorf("a refusing fleet: want its last error, got:\n%s", out)
	}

	// auto: stderr is no terminal here, so nothing but the driver's log.
	// The same wait, for 4s: nothing of it shows.
	start := time.Now()
	out = slipwayUntil(t, 30*time.Second, func(string) bool { return time.Since(start) > 4*time.Second },
		[]string{"CI="}, append(resume, "--server", "http://"+refusedAddr, "--progress", "auto", "--poll", "200ms")...)
	if strings.Contains(out, "waiting for") || !strings.Contains(out, "context canceled") {
		t.Errorf("--progress auto without a terminal printed progress (or nothing at all):\n%s", out)
	}
	if r := run(t, "", "version", "--progress", "sometimes"); r.code != 2 || !strings.Contains(r.stderr, "--progress must be auto, always or never") {
		t.Errorf("a bad --progress: %+v", r)
	}
}

// withoutToAndWait is args without --to (and its value) and --wait.
func withoutToAndWait(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--to":
			i++
			continue
		case "--wait":
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// TestPinProgress: pin says how many references it resolved of how many
// under --progress always, and nothing of the kind under auto without a
// terminal.
func TestPinProgress(t *testing.T) {
	_, host, _ := registryWith(t, "web:v1", "api:v2")
	dir := writeTree(t, map[string]string{
		"deploy/web.yaml": strings.ReplaceAll(deployment, "HOST", host),
		"deploy/api.yaml": strings.ReplaceAll(strings.ReplaceAll(deployment, "HOST/web:v1", host+"/api:v2"), "name: web", "name: api"),
	})
	r := run(t, dir, "pin", "--progress", "always", "deploy")
	if r.code != 0 || !strings.Contains(r.stderr, "pin: 0 of 2 references resolved\n") || !strings.Contains(r.stderr, "pin: 2 of 2 references resolved (last: "+host+"/") {
		t.Fatalf("pin --progress always: %+v", r)
	}
	r = run(t, dir, "pin", "--progress", "auto", "deploy")
	if r.code != 0 || strings.Contains(r.stderr, "references resolved") {
		t.Fatalf("pin --progress auto without a terminal: %+v", r)
	}
}

// TestTemplateBuildProgress: template build shows its phases, the bytes it
// froze and the bytes it pushed under --progress always.
func TestTemplateBuildProgress(t *testing.T) {
	_, host, _ := registryWith(t)
	base := busyboxBase(t, host)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../../templates/minimal")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "template.yaml")
	b, _ := os.ReadFile(spec)
	os.WriteFile(spec, []byte(strings.ReplaceAll(string(b), "127.0.0.1:5000/slipway/base:busybox", base)), 0o644)
	r := run(t, "", "template", "build", spec, "--push", host+"/templates/minimal", "--progress", "always")
	if r.code != 0 {
		t.Fatalf("template build: %+v", r)
	}
	for _, want := range []string{"template build: pull base " + host, "template build: freeze\n", "template build: frozen: ", " bytes over the base (", "template build: test\n",
		"push " + host + "/templates/minimal: ", " of "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("template build --progress always does not say %q:\n%s", want, r.stderr)
		}
	}
	r = run(t, "", "image", "from-dir", dir, "--push", host+"/x/dir", "--progress", "always")
	if r.code != 0 || !strings.Contains(r.stderr, "push "+host+"/x/dir: ") {
		t.Errorf("image from-dir --push --progress always: %+v", r)
	}
}
