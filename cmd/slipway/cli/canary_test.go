package cli

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/canary"
	"github.com/slipway-dev/slipway/pkg/telemetry"
)

// `slipway canary` against `runtime serve` (a deny pool of real bubblewrap
// sandboxes): --once passes and exits 0; run continuously, its metrics
// endpoint counts passing rounds; with the runtime stopped, --once fails
// at the claim, exits 1 and logs the ERROR line naming pool and step;
// `canary history` prints the last rounds, bounded by --history-max.
func TestCanaryCommand(t *testing.T) {
	repo, _ := runtimeConfigRepo(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(restartToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := startRuntime(t, repo, filepath.Join(dir, "state"), tokenFile)
	rt.waitWarm(t, 2)

	// The denied destination: a listener on the host's own address,
	// which a deny pool's sandbox must not reach.
	ln, err := net.Listen("tcp4", net.JoinHostPort(hostAddr(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var arrived atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			arrived.Add(1)
			c.Close()
		}
	}()
	hist := filepath.Join(dir, "canary.jsonl")
	base := []string{"canary", "--runtime", rt.base, "--token-file", tokenFile, "--pool", "agents", "--denied", "http://" + ln.Addr().String() + "/",
		"--history", hist, "--history-max", "3", "--lines", "300"}

	r := run(t, "", append(base, "--once")...)
	if r.code != 0 || !strings.Contains(r.stdout, "  agents  PASS  r-") || !strings.Contains(r.stdout, "egress_approved=- egress_denied=") {
		t.Fatalf("canary --once: %+v", r)
	}
	if !strings.Contains(r.stderr, `"level":"INFO","msg":"canary round passed","pool":"agents"`) {
		t.Errorf("canary --once log: %s", r.stderr)
	}
	t.Logf("canary --once:\n%s%s", r.stderr, r.stdout)
	if arrived.Load() != 0 {
		t.Fatalf("the denied listener took %d connections from the sandbox", arrived.Load())
	}

	// Continuously, with its metrics served.
	self, _ := os.Executable()
	cmd := exec.Command(self, append(base, "--interval", "100ms", "--metrics-listen", "127.0.0.1:0")...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
				addr <- a
			}
			t.Log("canary: " + sc.Text())
		}
	}()
	var murl string
	select {
	case a := <-addr:
		murl = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("canary did not serve its metrics")
	}
	var text string
	poll(t, 60*time.Second, "two passing rounds in the metrics", func() (bool, string) {
		_, text = scrapeMetrics(t, murl, "")
		return strings.Contains(text, `slipway_canary_rounds_total{pool="agents",result="pass"} 2`) ||
			strings.Contains(text, `slipway_canary_rounds_total{pool="agents",result="pass"} 3`), text
	})
	if err := telemetry.CheckExposition(strings.NewReader(text)); err != nil {
		t.Error(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	// The runtime stops: the claim fails, and the canary says so.
	if err := rt.stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Logf("runtime serve: %v", err)
	}
	r = run(t, "", append(base, "--once")...)
	if r.code != 1 || !strings.Contains(r.stdout, "  agents  FAIL  (no run)  claim=FAIL identity=-") || !strings.Contains(r.stdout, "failed at claim: pool agents granted no sandbox") {
		t.Fatalf("canary --once with the runtime stopped: %+v", r)
	}
	t.Logf("canary --once, the runtime stopped:\n%s%s", r.stderr, r.stdout)
	var alert map[string]any
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			if err := json.Unmarshal([]byte(line), &alert); err != nil {
				t.Fatalf("alert line %q: %v", line, err)
			}
		}
	}
	if alert["msg"] != "canary round failed" || alert["pool"] != "agents" || alert["step"] != "claim" || !strings.Contains(alert["reason"].(string), "connection refused") {
		t.Fatalf("alert %v in:\n%s", alert, r.stderr)
	}

	// The history: at most 3 rounds, the failing one last.
	r = run(t, "", "canary", "history", "--history", hist, "-o", "json")
	var rounds []canary.Round
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rounds) != nil || len(rounds) != 3 {
		t.Fatalf("canary history -o json: %+v", r)
	}
	if last := rounds[2]; last.Passed || last.FailedStep != canary.StepClaim || !rounds[0].Passed || rounds[0].RunID == "" {
		t.Errorf("history rounds: %+v", rounds)
	}
	if n := strings.Count(read(t, hist), "\n"); n != 3 {
		t.Errorf("the history file holds %d lines, want 3", n)
	}
	r = run(t, "", "canary", "history", "--history", hist, "-n", "2")
	t.Logf("canary history -n 2:\n%s", r.stdout)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "PASS") ||
		!strings.Contains(lines[1], "FAIL") || !strings.HasPrefix(lines[2], "    failed at claim: ") {
		t.Errorf("canary history -n 2: %+v", r)
	}
	if r = run(t, "", "canary", "history", "--history", filepath.Join(dir, "none.jsonl")); r.code != 2 || !strings.Contains(r.stderr, "none.jsonl") {
		t.Errorf("canary history of a missing file: %+v", r)
	}
	if r = run(t, "", "canary", "--runtime", "http://127.0.0.1:1", "--token-file", tokenFile, "--pool", "agents", "--once", "--approved", "ftp://x/"); r.code != 2 || !strings.Contains(r.stderr, `approved destination "ftp://x/"`) {
		t.Errorf("a bad --approved: %+v", r)
	}
}

// hostAddr is a non-loopback IPv4 address of the host.
func hostAddr(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("the host has no non-loopback IPv4 address to test with")
	return ""
}
