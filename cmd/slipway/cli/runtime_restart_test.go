package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/slipway-dev/slipway/pkg/api/runmanifest"
	"github.com/slipway-dev/slipway/pkg/api/runtimeapi"
	"github.com/slipway-dev/slipway/pkg/execution/runs"
	"github.com/slipway-dev/slipway/pkg/release/template"
)

// TestRuntimeKillAndRestart kills `runtime serve` (a separate process)
// with SIGKILL while it holds warm sandboxes and open claims, and starts it
// again on the same state directory: no run manifest is lost, no sandbox
// outlives the kill (bubblewrap processes) or the restart (workspace
// directories), the claims cut short are recorded as failed, and the warm
// pool fills again. A SIGTERM then stops it cleanly.
func TestRuntimeKillAndRestart(t *testing.T) {
	start := time.Now()
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ctx := context.Background()
	t.Logf("fixtures ready after %v", time.Since(start).Round(time.Millisecond))

	// First life: a full warm pool, three claims (one running a command,
	// one released, one only granted), and the pool full again.
	rt1 := startRuntime(t, repo, state, tokenFile)
	rt1.waitWarm(t, 2)
	var grants []*runtimeapi.Grant
	for range 3 {
		g, err := rt1.client.Claim(ctx, "agents", runtimeapi.ClaimBody{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g)
	}
	running, released, granted := grants[0], grants[1], grants[2]
	res, err := rt1.client.Exec(ctx, running.RunID, runtimeapi.ExecBody{Token: running.Token,
		Argv: []string{"sh", "-c", "echo work > /workspace/out && cat /workspace/out"}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "work\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	zero := 0
	if err := rt1.client.Release(ctx, released.RunID, runtimeapi.ReleaseBody{Token: released.Token, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	rt1.waitWarm(t, 2)
	// two warm members and the two claimed sandboxes
	before := workspaces(t, state)
	if len(before) != 4 || !slices.Contains(before, running.SandboxID) || !slices.Contains(before, granted.SandboxID) {
		t.Fatalf("workspaces before the kill: %v; want 2 warm and those of %s and %s", before, running.SandboxID, granted.SandboxID)
	}
	if p := bwrapOf(t, state); len(p) < len(before) {
		t.Fatalf("%d bwrap processes for %d sandboxes before the kill", len(p), len(before))
	}

	// SIGKILL: the sandboxes die with the runtime.
	killed := time.Now()
	if err := rt1.stop(t, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("the killed runtime exited 0")
	}
	poll(t, 10*time.Second, "bwrap processes of the killed runtime to end", func() (bool, string) {
		p := bwrapOf(t, state, before...)
		return len(p) == 0, fmt.Sprintf("bwrap pids %v", p)
	})
	if got := workspaces(t, state); !slices.Equal(got, before) {
		t.Fatalf("workspaces after the kill: %v, want those of the dead sandboxes %v", got, before)
	}

	// Second life on the same state: the dead sandboxes are reaped and the
	// runs cut short finalised before the API serves.
	rt2 := startRuntime(t, repo, state, tokenFile)
	serving := time.Now()
	if !rt2.logged("finalised 2 open runs") || !rt2.logged("reaped 4 sandboxes") {
		t.Errorf("the restarted runtime's log does not say it reaped 4 sandboxes and finalised 2 runs:\n%s", rt2.text())
	}
	for _, g := range []*runtimeapi.Grant{running, granted} {
		m, err := rt2.client.Run(ctx, g.RunID)
		if err != nil {
			t.Fatalf("run %s after the restart: %v", g.RunID, err)
		}
		rr := m.Lifecycle.ResourcesReleased
		if m.Status != runmanifest.StatusFailed || rr.Before(killed) || rr.After(serving) || m.ExitCode != nil {
			t.Errorf("run %s after the restart: status %s, exit code %v, resources released %v (killed %v, serving %v); want failed, none, in between",
				g.RunID, m.Status, m.ExitCode, rr, killed, serving)
		}
		// what it recorded before stays
		if m.SandboxID != g.SandboxID || m.Generation != g.Generation || m.Tenant != "acme" || m.AllocationAttempt != 1 || m.Lifecycle.SandboxAssigned.IsZero() {
			t.Errorf("run %s lost what it recorded: %+v", g.RunID, m)
		}
		if ran := !m.Lifecycle.RunnerAwakened.IsZero(); ran != (g == running) {
			t.Errorf("run %s: runner_awakened %v", g.RunID, m.Lifecycle.RunnerAwakened)
		}
	}
	if m, err := rt2.client.Run(ctx, released.RunID); err != nil || m.Status != runmanifest.StatusCompleted || m.Lifecycle.ResourcesReleased.After(killed) {
		t.Errorf("the released run after the restart: %+v, %v", m, err)
	}
	// the claims died with the first runtime: their tokens open nothing
	var ae *runtimeapi.APIError
	if _, err := rt2.client.Exec(ctx, running.RunID, runtimeapi.ExecBody{Token: running.Token, Argv: []string{"true"}}); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("exec in a claim of the killed runtime: %v, want 404", err)
	}
	st := rt2.waitWarm(t, 2)
	if st.Claimed != 0 {
		t.Errorf("claimed sandboxes after the restart: %+v", st)
	}
	after := workspaces(t, state)
	if len(after) != st.Ready+st.Warming+st.Claimed {
		t.Errorf("workspaces after the restart: %v; the runtime has %+v", after, st)
	}
	for _, id := range after {
		if slices.Contains(before, id) {
			t.Errorf("sandbox %s of the killed runtime was not reaped", id)
		}
	}
	if p := bwrapOf(t, state); len(p) < len(after) {
		t.Errorf("%d bwrap processes for the %d new warm members", len(p), len(after))
	}

	// SIGTERM: a clean stop that leaves nothing behind.
	if err := rt2.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("the runtime did not stop cleanly on SIGTERM: %v\n%s", err, rt2.text())
	}
	if p := bwrapOf(t, state, slices.Concat(before, after)...); len(p) != 0 {
		t.Errorf("bwrap processes after the stop: %v", p)
	}
	if w := workspaces(t, state); len(w) != 0 {
		t.Errorf("workspaces after the stop: %v", w)
	}
	store, err := runs.OpenSQLite(ctx, filepath.Join(state, runs.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if open, err := store.Open(ctx); err != nil || len(open) != 0 {
		t.Errorf("open runs after the stop: %v, %v", open, err)
	}
	for _, g := range grants {
		if _, err := store.Get(ctx, g.RunID); err != nil {
			t.Errorf("run %s after the stop: %v", g.RunID, err)
		}
	}
	t.Logf("kill, restart and stop took %v", time.Since(killed).Round(time.Millisecond))
}

const restartToken = "restart-test-token-0123456789"

// runtimeConfigRepo makes a config repository with pool agents whose active
// generation pins a real runner and a busybox template.
func runtimeConfigRepo(t *testing.T) (repo, runnerRef string) {
	t.Helper()
	return runtimeConfigRepoPins(t)
}

// runtimeConfigRepoPins is runtimeConfigRepo with more --pin KIND=REF
// arguments for the generation (a secretVersion, say).
func runtimeConfigRepoPins(t *testing.T, pins ...string) (repo, runnerRef string) {
	t.Helper()
	_, host, digests := registryWith(t, "platform/cp:v1")
	dir := t.TempDir()
	ctx := context.Background()
	bin := filepath.Join(dir, "slipway-runner")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../slipway-runner")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build runner: %v\n%s", err, out)
	}
	r := run(t, "", "image", "runner", bin, "--push", host+"/platform/runner:v1")
	if r.code != 0 {
		t.Fatalf("image runner: %+v", r)
	}
	runnerRef = strings.TrimSpace(r.stdout)
	base := filepath.Join(dir, "base")
	if out, err := exec.Command("bash", "../../../fixtures/base/busybox-rootfs.sh", base).CombinedOutput(); err != nil {
		t.Fatalf("busybox-rootfs.sh: %v\n%s", err, out)
	}
	timg, closeT, err := template.ImageFromDir(ctx, base, time.Unix(0, 0), v1.Platform{OS: "linux", Architecture: "amd64"}, []string{"PATH=/bin:/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeT()
	cfg, _ := timg.ConfigFile()
	cc := cfg.Config
	cc.WorkingDir = "/workspace"
	if timg, err = mutate.Config(timg, cc); err != nil {
		t.Fatal(err)
	}
	templateRef := push(t, host+"/templates/busybox:v1", timg)
	repo = filepath.Join(dir, "config.git")
	if r := run(t, "", "config", "init", repo, "--pool", "agents"); r.code != 0 {
		t.Fatal(r)
	}
	gen := filepath.Join(dir, "g1.yaml")
	if r := run(t, "", append([]string{"generation", "create", "--pool", "agents", "--insecure-skip-verify", "--output", gen,
		"--pin", "controlPlane=" + host + "/platform/cp@" + digests["platform/cp:v1"], "--pin", "runner=" + runnerRef,
		"--pin", "workspaceTemplate=" + templateRef, "--control-plane-protocol", "1", "--runner-protocol", "1"}, pinArgs(pins)...)...); r.code != 0 {
		t.Fatal(r)
	}
	if r := run(t, "", "promote", "--repo", repo, "--pool", "agents", "--generation", gen, "--activate", "--insecure-skip-verify"); r.code != 0 {
		t.Fatal(r)
	}
	return repo, runnerRef
}

func pinArgs(pins []string) []string {
	var out []string
	for _, p := range pins {
		out = append(out, "--pin", p)
	}
	return out
}

// runtimeProc is `slipway runtime serve` running as a separate process.
type runtimeProc struct {
	cmd    *exec.Cmd
	base   string
	client *runtimeapi.Client
	log    *lineLog
	done   chan struct{} // closed when it has exited, with err
	err    error
}

// startRuntime starts `runtime serve` on state and returns once it serves.
func startRuntime(t *testing.T, repo, state, tokenFile string, extra ...string) *runtimeProc {
	t.Helper()
	return startRuntimeArgs(t, repo, state, tokenFile, extra...)
}

// startRuntimeArgs is startRuntime with more flags (a later flag wins).
func startRuntimeArgs(t *testing.T, repo, state, tokenFile string, args ...string) *runtimeProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := &lineLog{t: t, addr: make(chan string, 1)}
	cmd := exec.Command(self, append([]string{"runtime", "serve", "--config-repo", repo, "--state", state, "--listen", "127.0.0.1:0",
		"--token-file", tokenFile, "--insecure-skip-verify", "--sync-interval", "200ms"}, args...)...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	cmd.Stderr = log
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &runtimeProc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case a := <-log.addr:
		p.base = "http://" + a
		if p.client, err = runtimeapi.NewClient(p.base, restartToken); err != nil {
			t.Fatal(err)
		}
		return p
	case <-p.done:
		t.Fatalf("runtime serve exited before serving: %v\n%s", p.err, log.text())
	case <-time.After(60 * time.Second):
		t.Fatalf("runtime serve did not start within 60s:\n%s", log.text())
	}
	return nil
}

// stop sends sig and waits up to limit for the process to exit.
func (p *runtimeProc) stop(t *testing.T, sig syscall.Signal, limit time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(limit):
		t.Fatalf("runtime serve did not exit within %v of %v:\n%s", limit, sig, p.text())
	}
	return nil
}

func (p *runtimeProc) logged(s string) bool { return strings.Contains(p.log.text(), s) }
func (p *runtimeProc) text() string         { return p.log.text() }

// waitWarm waits until the active generation of pool agents has n ready
// warm members and none starting, and returns its status.
func (p *runtimeProc) waitWarm(t *testing.T, n int) runtimeapi.GenerationStatus {
	t.Helper()
	var st runtimeapi.GenerationStatus
	poll(t, 30*time.Second, fmt.Sprintf("%d warm members", n), func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/pools/agents", nil)
		req.Header.Set("Authorization", "Bearer "+restartToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var out struct{ Generations []runtimeapi.GenerationStatus }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			return false, resp.Status
		}
		for _, g := range out.Generations {
			if g.State == "active" {
				st = g
				return g.Ready == n && g.Warming == 0, fmt.Sprintf("%+v", g)
			}
		}
		return false, fmt.Sprintf("no active generation in %+v", out.Generations)
	})
	return st
}

// lineLog is the runtime's standard error: logged, kept, and watched for
// the address it serves on.
type lineLog struct {
	t    *testing.T
	addr chan string
	mu   sync.Mutex
	buf  strings.Builder
	part string
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(b)
	l.part += string(b)
	for {
		i := strings.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := l.part[:i]
		l.part = l.part[i+1:]
		l.t.Log("serve: " + line)
		if a, ok := strings.CutPrefix(line, "serving on "); ok {
			select {
			case l.addr <- a:
			default:
			}
		}
	}
	return len(b), nil
}

func (l *lineLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// poll calls cond until it reports true, failing the test with cond's last
// word once limit has passed.
func poll(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", limit, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bwrapOf lists the host pids of bwrap processes of the sandboxes in state
// (and of the sandboxes known, whose folders may be gone): bwrap's command
// line carries the runner's "--sandbox ID" (its mounts, which name state,
// reach it through --args and are not on its command line).
func bwrapOf(t *testing.T, state string, known ...string) []int {
	t.Helper()
	ids := map[string]bool{}
	for _, id := range append(workspaces(t, state), known...) {
		ids[id] = true
	}
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue // gone, or on its way out
		}
		args := strings.Split(string(b), "\x00")
		i := slices.Index(args, "--sandbox")
		if filepath.Base(args[0]) != "bwrap" || i < 0 || i+1 >= len(args) || !ids[args[i+1]] {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

// workspaces lists the sandboxes (by id) whose workspace directory is in
// state, sorted; a deletion under way counts too.
func workspaces(t *testing.T, state string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(state, "sandboxes", "sandboxes", "*", "workspace"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range dirs {
		ids = append(ids, filepath.Base(filepath.Dir(d)))
	}
	slices.Sort(ids)
	return ids
}
