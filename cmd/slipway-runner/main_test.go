package main

import (
	"debug/elf"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox/runner"
	"github.com/slipway-dev/slipway/pkg/isolate/shape"
)

// Built as the Makefile builds it, the runner is a static executable (it
// runs on any template, with or without a libc) that knows its own digest.
func TestStaticAndKnowsItself(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "slipway-runner")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the runner is dynamically linked")
		}
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		RunnerBinarySHA256 string `json:"runnerBinarySha256"`
		ProtocolVersion    int    `json:"protocolVersion"`
		Version            string `json:"version"`
		Untagged           bool   `json:"untagged"`
		GoVersion          string `json:"goVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	want, _ := runner.FileDigest(bin)
	if v.RunnerBinarySHA256 != want || v.ProtocolVersion != runner.ProtocolVersion {
		t.Errorf("version = %s, want digest %s", out, want)
	}
	// An untagged test build says so, with a v0.0.0- version and the Go that built it.
	if !strings.HasPrefix(v.Version, "v0.0.0-") || !v.Untagged || v.GoVersion != runtime.Version() {
		t.Errorf("version = %s: want an untagged v0.0.0- version built by %s", out, runtime.Version())
	}
	// install copies it, as the init container of a rendered template does.
	dir := t.TempDir()
	if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
		t.Fatalf("install: %v %s", err, out)
	}
	if got, _ := runner.FileDigest(filepath.Join(dir, "slipway-runner")); got != want {
		t.Errorf("installed copy %s, want %s", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, "slipway-runner")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("installed copy: %v %v", fi, err)
	}
	// install --refresh also runs a pod's refresh phase: a fresh machine id
	// per pod (per refresh folder), read-only, kept when run again.
	var ids []string
	for i := range 2 {
		rdir, bindir := t.TempDir(), t.TempDir()
		for range 2 {
			if out, err := exec.Command(bin, "install", bindir, "--refresh", rdir).CombinedOutput(); err != nil || !strings.Contains(string(out), "refreshed machine-id") {
				t.Fatalf("install --refresh: %v %s", err, out)
			}
			id, err := os.ReadFile(filepath.Join(rdir, shape.MachineIDFile))
			if err != nil || !shape.ValidMachineID(id) {
				t.Fatalf("pod %d: machine id %q %v", i, id, err)
			}
			if len(ids) == i {
				ids = append(ids, string(id))
			} else if ids[i] != string(id) {
				t.Errorf("pod %d: the second run changed the machine id %q to %q", i, ids[i], id)
			}
		}
		if fi, err := os.Stat(filepath.Join(rdir, shape.MachineIDFile)); err != nil || fi.Mode().Perm() != 0o444 {
			t.Errorf("machine id: %v %v", fi, err)
		}
		if got, _ := runner.FileDigest(filepath.Join(bindir, "slipway-runner")); got != want {
			t.Errorf("install --refresh: installed copy %s, want %s", got, want)
		}
	}
	if ids[0] == ids[1] {
		t.Errorf("two pods got the same machine id %q", ids[0])
	}
	for _, args := range [][]string{nil, {"bogus"}, {"serve", "--listen-fd", "99"}, {"install"}, {"install", filepath.Join(dir, "missing")},
		{"install", dir, "--refresh"}, {"install", dir, "--refresh", filepath.Join(dir, "missing")}, {"install", dir, "--bogus", dir},
		{"credential"}, {"credential", "cat", "token"}, {"credential", "put", "a/b"}, {"credential", "rm", "../token"}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err == nil || !strings.HasPrefix(string(out), "slipway-runner: ") {
			t.Errorf("%v: %v %q", args, err, out)
		}
	}

	// probe dial takes IPv4 and IPv6 targets: exit 0 when connected, 3
	// when not (the network proof's answer).
	for _, network := range []string{"tcp4", "tcp6"} {
		host := map[string]string{"tcp4": "127.0.0.1", "tcp6": "::1"}[network]
		ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
		if err != nil {
			t.Logf("%s: no listener on this host: %v", network, err)
			continue
		}
		addr := ln.Addr().String()
		if out, err := exec.Command(bin, "probe", "dial", addr).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "connected to "+addr) {
			t.Errorf("probe dial %s with a listener: %v %q", addr, err, out)
		}
		ln.Close()
		out, err := exec.Command(bin, "probe", "dial", addr).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.HasPrefix(string(out), "no connection to "+addr) {
			t.Errorf("probe dial %s with no listener: %v %q, want exit 3", addr, err, out)
		}
	}
}
