package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipway-dev/slipway/pkg/execution/egress"
)

// `slipway-runner egress` is an allow-list pool's proxy in a pod: it
// opens a tunnel to a listed destination, refuses one not listed (the
// same probe a rollout's network proof runs), and writes each attempt as
// a JSON line on its standard output, the last ones when it is stopped.
func TestEgressProxy(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "slipway-runner")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	allowed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.Close()
	go func() {
		for {
			c, err := allowed.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	denied, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer denied.Close()

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := free.Addr().String()
	free.Close()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "egress", "--listen", proxy, "--allow", allowed.Addr().String()+",*.example.com:443")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", proxy); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy never listened: %s", stderr.String())
		}
	}
	if out, err := exec.Command(bin, "probe", "connect", proxy, allowed.Addr().String()).CombinedOutput(); err != nil {
		t.Errorf("allowed destination: %v %s", err, out)
	}
	out, err := exec.Command(bin, "probe", "connect", proxy, denied.Addr().String()).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), "refused") {
		t.Errorf("denied destination: %v %s, want exit 3", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("egress after SIGTERM: %v\n%s", err, stderr.String())
	}
	var got []egress.Attempt
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var a egress.Attempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("attempt line %q: %v", sc.Text(), err)
		}
		got = append(got, a)
	}
	byDest := map[string]egress.Attempt{}
	for _, a := range got {
		byDest[a.Destination] = a
	}
	if a := byDest[allowed.Addr().String()]; len(got) != 2 || !a.Allowed || a.Method != "CONNECT" || a.Rule != allowed.Addr().String() {
		t.Errorf("attempts %+v: want the allowed tunnel recorded with its rule", got)
	}
	if a := byDest[denied.Addr().String()]; a.Allowed || a.Reason == "" {
		t.Errorf("attempts %+v: want the denied one recorded with its reason", got)
	}

	// A bad entry is refused before anything listens, naming it.
	out, err = exec.Command(bin, "egress", "--listen", proxy, "--allow", "10.0.0.1:443,nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `allow[1] "nope"`) {
		t.Errorf("bad entry: %v %s", err, out)
	}
}
