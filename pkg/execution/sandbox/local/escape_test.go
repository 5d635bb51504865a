package local_test

// The escape regression suite: each test is one way out of a local
// sandbox that must stay shut. A test that fails has found an escape. A
// case only a stronger runtime closes (a kernel exploit's way out) is
// skipped with the runtime class that closes it; docs/security.md
// lists the same cases.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/execution/sandbox"
	"github.com/slipway-dev/slipway/pkg/execution/sandbox/local"
)

// escapeWorld is a backend with two running sandboxes (the attacker and a
// neighbour), the state directory and a planted host secret.
type escapeWorld struct {
	b         *local.Backend
	dir       string
	s, other  *sandbox.Sandbox
	secret    string // host path of a planted file
	secretVal string
}

func newEscapeWorld(t *testing.T) *escapeWorld {
	t.Helper()
	setup(t)
	dir := t.TempDir()
	b := newBackend(t, dir)
	img := templateImage(t, "", "machine-id")
	w := &escapeWorld{b: b, dir: dir, secretVal: "planted-" + strconv.Itoa(os.Getpid())}
	w.s = create(t, b, specFor(t, img))
	w.other = create(t, b, specFor(t, img))
	w.secret = filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(w.secret, []byte(w.secretVal), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// mustFail runs script in the attacker sandbox and fails the test when it
// exits 0 or its output holds leak.
func (w *escapeWorld) mustFail(t *testing.T, script, leak string) {
	t.Helper()
	out, stderr, code := sh(t, w.s, script)
	if code == 0 || (leak != "" && strings.Contains(out+stderr, leak)) {
		t.Fatalf("escaped: %q exited %d: %q %q", script, code, out, stderr)
	}
}

// hostListener listens on addr on the host and counts connections.
func hostListener(t *testing.T, addr string) (port string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := make(chan int, 1)
	n <- 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n <- <-n + 1
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() int { v := <-n; n <- v; return v }
}

func TestEscapeHostLoopback(t *testing.T) {
	w := newEscapeWorld(t)
	port, accepted := hostListener(t, "127.0.0.1:0")
	w.mustFail(t, "nc -w 2 127.0.0.1 "+port+" </dev/null", "")
	if accepted() != 0 {
		t.Fatal("the host's loopback listener accepted a connection from the sandbox")
	}
}

func TestEscapeHostAddress(t *testing.T) {
	w := newEscapeWorld(t)
	var ip string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP.String()
			break
		}
	}
	if ip == "" {
		t.Fatal("the host has no non-loopback IPv4 address to test with")
	}
	port, accepted := hostListener(t, net.JoinHostPort(ip, "0"))
	w.mustFail(t, fmt.Sprintf("nc -w 2 %s %s </dev/null", ip, port), "")
	if accepted() != 0 {
		t.Fatal("the host's listener accepted a connection from the sandbox")
	}
}

func TestEscapeMetadataAddress(t *testing.T) {
	w := newEscapeWorld(t)
	w.mustFail(t, "nc -w 2 169.254.169.254 80 </dev/null", "")
	w.mustFail(t, "wget -T 2 -q -O - http://169.254.169.254/latest/meta-data/", "")
}

func TestEscapeHostUnixSockets(t *testing.T) {
	w := newEscapeWorld(t)
	// The runtime's API socket would live in the state directory; the
	// runner sockets do. Neither that directory nor the container
	// runtimes' sockets are in the sandbox.
	for _, p := range []string{filepath.Join(w.dir, "sandboxes", w.other.ID, "runner.sock"),
		filepath.Join(w.dir, "sandboxes", w.s.ID, "runner.sock"),
		"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"} {
		w.mustFail(t, "test -e "+p, "")
	}
}

func TestEscapeReadHostFiles(t *testing.T) {
	w := newEscapeWorld(t)
	w.mustFail(t, "cat "+w.secret, w.secretVal)
	w.mustFail(t, "cat /proc/1/root"+w.secret, w.secretVal)
	// mountinfo shows the host paths bind mounts come from (the template,
	// the runner, the state directory): none of them can be opened.
	out, _, _ := sh(t, w.s, "cat /proc/self/mountinfo")
	tried := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[3] == "/" || !strings.HasPrefix(f[3], w.dir) {
			continue
		}
		tried++
		w.mustFail(t, "ls -d "+f[3], "")
	}
	if tried == 0 {
		t.Fatalf("no host path of the state directory in mountinfo to try:\n%s", out)
	}
}

func TestEscapeReadStateAndTokens(t *testing.T) {
	w := newEscapeWorld(t)
	if err := w.b.PutCredential(context.Background(), w.other.ID, "token", []byte("neighbour-token-value")); err != nil {
		t.Fatal(err)
	}
	w.mustFail(t, "ls "+w.dir, "")
	w.mustFail(t, "cat "+filepath.Join(w.dir, "sandboxes", w.other.ID, "sandbox.json"), "runnerBinarySha256")
	// The neighbour's credential is in its tmpfs only: nothing here names it.
	w.mustFail(t, "grep -r neighbour-token-value /run /tmp /workspace /etc 2>/dev/null", "neighbour-token-value")
}

func TestEscapeWriteTemplateRunnerOrNeighbour(t *testing.T) {
	w := newEscapeWorld(t)
	w.mustFail(t, "echo x > /bin/escape", "")
	w.mustFail(t, "echo x > "+sandbox.RunnerPath, "")
	w.mustFail(t, "echo x > "+filepath.Join(w.dir, "sandboxes", w.other.ID, "workspace", "escape"), "")
	if _, err := os.Stat(filepath.Join(w.dir, "sandboxes", w.other.ID, "workspace", "escape")); err == nil {
		t.Fatal("the neighbour's workspace got a file from the sandbox")
	}
}

func TestEscapeSeeOrSignalOtherProcesses(t *testing.T) {
	w := newEscapeWorld(t)
	other, err := w.b.Pids(w.other.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := sh(t, w.s, "ls /proc | grep -c '^[0-9]'")
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n == 0 || n > 6 {
		t.Errorf("the sandbox sees %q processes: more than its own", out)
	}
	for _, pid := range []int{other.Runner, other.Init, os.Getpid()} {
		w.mustFail(t, fmt.Sprintf("kill -0 %d", pid), "")
	}
	stillServes(t, w.other)
}

func TestEscapePrivileges(t *testing.T) {
	w := newEscapeWorld(t)
	// No new privileges: a setuid binary runs with the caller's ids.
	// The bounding set is not emptied (bwrap keeps it), but with no
	// permitted, effective, inheritable or ambient capability and
	// no_new_privs set, no execve can gain one.
	out, _, _ := sh(t, w.s, "grep -E '^(NoNewPrivs|Cap(Inh|Prm|Eff|Amb)):' /proc/self/status")
	if !strings.Contains(out, "NoNewPrivs:\t1") || strings.Count(out, ":\t0000000000000000") != 4 {
		t.Errorf("privileges inside:\n%s", out)
	}
	w.mustFail(t, "mount -t tmpfs none /tmp", "")
	w.mustFail(t, "mount --bind / /tmp", "")
	w.mustFail(t, "nsenter -t 1 -m -u -i -n -p true", "")
}

// escapeProbe is where the test templates hold testdata/escapeprobe.
const escapeProbe = "/usr/bin/escapeprobe"

// runnerPid finds the sandbox's runner by its command line (readable
// inside, like every process's).
func (w *escapeWorld) runnerPid(t *testing.T) string {
	t.Helper()
	out, _, _ := sh(t, w.s, `for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline | grep -q '^/usr/local/bin/slipway-runner serve'; then echo ${p#/proc/}; fi; done`)
	pid := strings.TrimSpace(out)
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("the runner process was not found inside: %q", out)
	}
	return pid
}

// The seccomp filter (package isolate/seccomp), bwrap's --disable-userns
// and the non-dumpable runner close the next ones; docs/security.md says
// which lock holds each.

func TestEscapeUserNamespace(t *testing.T) {
	w := newEscapeWorld(t)
	// unshare(2) and clone(2) with CLONE_NEWUSER: root in a namespace of
	// its own, and the kernel's namespace code within reach.
	w.mustFail(t, "unshare -U true", "")
	w.mustFail(t, escapeProbe+" userns", "escaped")
}

func TestEscapePtraceRunner(t *testing.T) {
	w := newEscapeWorld(t)
	// The runner runs as the workload's uid in its pid namespace; it is
	// non-dumpable, so the kernel refuses every way into it.
	pid := w.runnerPid(t)
	w.mustFail(t, "head -c 64 /proc/"+pid+"/environ", "PATH=")
	w.mustFail(t, "dd if=/proc/"+pid+"/mem bs=1 skip=4194304 count=4", "ELF") // 0x400000: a static Go binary's ELF header
	w.mustFail(t, "ls -l /proc/"+pid+"/fd/ | grep 'socket:'", "")             // the names show, not where they lead
	w.mustFail(t, escapeProbe+" ptrace "+pid, "escaped")
	w.mustFail(t, escapeProbe+" vmread "+pid, "ELF")
	stillServes(t, w.s)
}

func TestEscapeKernelKeyring(t *testing.T) {
	w := newEscapeWorld(t)
	// The kernel keyring is per uid, not per sandbox: a key added here
	// would be read by every process of the uid on the host.
	w.mustFail(t, escapeProbe+" keyring", "escaped")
}

func TestEscapeSeccompRefuses(t *testing.T) {
	w := newEscapeWorld(t)
	// Calls the kernel allows an unprivileged process on this host, that
	// Docker's default profile refuses (and, for ptrace, Slipway's).
	// (On this test host the kernel refuses bpf to a process without
	// CAP_BPF as well: kernel.unprivileged_bpf_disabled.)
	for _, probe := range []string{"ptrace-child", "perf", "bpf"} {
		w.mustFail(t, escapeProbe+" "+probe, "escaped")
	}
	out, _, _ := sh(t, w.s, "grep ^Seccomp: /proc/self/status")
	if out != "Seccomp:\t2\n" {
		t.Errorf("the workload's seccomp mode: %q, want a filter (2)", out)
	}
}
