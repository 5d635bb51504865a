package isolate_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/slipway-dev/slipway/pkg/isolate"

	"github.com/slipway-dev/slipway/testharness/need"
)

func TestRun(t *testing.T) {
	t.Parallel()
	root := os.Geteuid() == 0
	cases := []struct {
		name     string
		script   string
		spec     func(*isolate.Spec)
		onlyRoot bool
		exit     int
		want     string // exact output, unless contains is set
		contains []string
	}{
		{name: "echo and exit code", script: "echo hello; exit 7", exit: 7, want: "hello\n"},
		{name: "success", script: "true", want: ""},
		{name: "stdout and stderr in order", script: "echo out; echo err >&2; echo out2", want: "out\nerr\nout2\n"},
		{name: "killed by a signal inside", script: "kill -TERM $$", exit: 128 + 15, want: ""},
		{name: "command not found", spec: func(s *isolate.Spec) { s.Argv = []string{"no-such-command"} },
			exit: 1, contains: []string{"bwrap: execvp no-such-command"}},
		{name: "host processes invisible", script: "echo /proc/[0-9]*; cat /proc/1/comm", want: "/proc/1 /proc/2\nbwrap\n"},
		{name: "default hostname", script: "hostname", want: isolate.DefaultHostname + "\n"},
		{name: "hostname", script: "hostname", spec: func(s *isolate.Spec) { s.Hostname = "builder-1" }, want: "builder-1\n"},
		{name: "environment is exactly Env, sorted, plus PWD",
			spec: func(s *isolate.Spec) {
				s.Argv = []string{"env"} // no shell: sh would add SHLVL
				s.Env = isolate.Env{"PATH": "/bin", "A": "1", "B": "two words", "EMPTY": "", "Q": `it's "quoted"`}
				s.Dir = "/work"
			},
			want: "A=1\nB=two words\nEMPTY=\nPATH=/bin\nQ=it's \"quoted\"\nPWD=/work\n"},
		{name: "working directory", script: "pwd", spec: func(s *isolate.Spec) { s.Dir = "/work" }, want: "/work\n"},
		{name: "default working directory", script: "pwd", want: "/\n"},
		{name: "read-only root refuses writes", script: "touch /new", spec: func(s *isolate.Spec) { s.ReadOnlyRoot = true },
			exit: 1, contains: []string{"Read-only file system"}},
		{name: "private /tmp under a read-only root", script: "echo hi > /tmp/f && cat /tmp/f",
			spec: func(s *isolate.Spec) { s.ReadOnlyRoot = true }, want: "hi\n"},
		{name: "tmpfs", script: "echo x > /scratch/f && cat /scratch/f",
			spec: func(s *isolate.Spec) { s.ReadOnlyRoot = true; s.Tmpfs = []string{"/scratch"} }, want: "x\n"},
		{name: "sized tmpfs: its size, its mode, ENOSPC past it",
			script: `grep -o ' /scratch .*' /proc/self/mountinfo | grep -o 'size=[^,]*,mode=[0-7]*'; stat -c %a /scratch
head -c 2000000 /dev/zero > /scratch/f; echo status $?; wc -c < /scratch/f`,
			spec: func(s *isolate.Spec) {
				s.ReadOnlyRoot = true
				s.Sized = []isolate.SizedTmpfs{{Target: "/scratch", Bytes: 1 << 20, Mode: 0o700}}
			},
			contains: []string{"size=1024k,mode=700\n700\n", "status 1\n1048576\n"}},
		{name: "stdin", script: "cat", spec: func(s *isolate.Spec) { s.Stdin = strings.NewReader("from stdin") }, want: "from stdin"},
		{name: "no stdin reads EOF", script: "cat; echo end", want: "end\n"},
		{name: "rlimits", script: "ulimit -n; ulimit -f; ulimit -t; ulimit -v; ulimit -u",
			spec: func(s *isolate.Spec) {
				s.Limits = isolate.Limits{NoFile: 64, FileSize: 1 << 20, CPUSeconds: 7, AddressSpace: 512 << 20, NProc: 4096}
			},
			want: "64\n2048\n7\n524288\n4096\n"},
		{name: "file size limit enforced", script: "head -c 10000 /dev/zero > /tmp/f; echo status $?; wc -c < /tmp/f",
			spec:     func(s *isolate.Spec) { s.Limits.FileSize = 4096 },
			contains: []string{"status 153\n", "4096\n"}},
		{name: "no capabilities by default", script: "grep CapEff /proc/self/status", want: "CapEff:\t0000000000000000\n"},
		{name: "chown refused without capabilities", script: "touch /tmp/f && chown 123 /tmp/f", onlyRoot: true,
			// EPERM, or EINVAL in the sandbox's user namespace of one id
			// (see Spec.UnsafeNoSeccomp), where uid 123 has no mapping.
			exit: 1, contains: []string{"chown: /tmp/f: "}},
		{name: "BuildCaps allow chown", script: "touch /tmp/f && chown 123:45 /tmp/f && ls -n /tmp/f", onlyRoot: true,
			spec: func(s *isolate.Spec) { s.Caps = isolate.BuildCaps() }, contains: []string{" 123 ", " 45 "}},
		{name: "user namespace", script: "id -u; id -g", spec: func(s *isolate.Spec) { s.User = &isolate.User{UID: 1000, GID: 1001} },
			want: "1000\n1001\n"},
		{name: "user namespace mapping uid 0", script: "id -u; id -g", spec: func(s *isolate.Spec) { s.User = &isolate.User{} },
			want: "0\n0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.onlyRoot && !root {
				need.Root(t, "the case runs the sandbox as another user")
			}
			s := baseSpec(t, tc.script)
			if tc.spec != nil {
				tc.spec(&s)
			}
			res, err := isolate.Run(context.Background(), s)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tc.exit || res.Signal != "" || res.TimedOut || res.Truncated {
				t.Errorf("got %s, want exit %d", describe(res), tc.exit)
			}
			if tc.contains == nil && string(res.Output) != tc.want {
				t.Errorf("output %q, want %q", res.Output, tc.want)
			}
			for _, c := range tc.contains {
				if !strings.Contains(string(res.Output), c) {
					t.Errorf("output %q does not contain %q", res.Output, c)
				}
			}
		})
	}
}

func TestNetwork(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		network bool
		want    string
	}{
		{"off by default: only loopback, host unreachable", false, "interfaces 1\nrefused\n"},
		{"on: host listener reachable", true, "sent\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer func() { _ = c.Close() }()
				b := make([]byte, 16)
				n, _ := c.Read(b)
				got <- string(b[:n])
			}()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			script := "echo ping | nc -w 2 127.0.0.1 " + port + " && echo sent"
			if !tc.network {
				script = "echo interfaces $(grep -c : /proc/net/dev); nc -w 2 127.0.0.1 " + port +
					" </dev/null 2>/dev/null && echo connected || echo refused"
			}
			s := baseSpec(t, script)
			s.Network = tc.network
			res, err := isolate.Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || string(res.Output) != tc.want {
				t.Errorf("got %s, want output %q", describe(res), tc.want)
			}
			if tc.network {
				if msg := <-got; msg != "ping\n" {
					t.Errorf("listener got %q", msg)
				}
			}
		})
	}
}

func TestMounts(t *testing.T) {
	t.Parallel()
	roDir, rwDir, src := t.TempDir(), t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(roDir, "seed"), "seed\n")
	mustWrite(t, filepath.Join(src, "code"), "code\n")
	s := baseSpec(t, `echo a > /rw/f && echo rw-ok
if echo b > /ro/f; then echo ro-writable; else echo ro-refused; fi
cat /ro/seed /data/src/code
touch /data/new && echo data-writable`)
	s.ReadOnlyRoot = true
	// /data/src is declared before the tmpfs at /data; mounting parents
	// first keeps it visible.
	s.Mounts = []isolate.Mount{
		{Source: src, Target: "/data/src", ReadOnly: true},
		{Source: roDir, Target: "/ro", ReadOnly: true},
		{Source: rwDir, Target: "/rw"},
	}
	s.Tmpfs = []string{"/data"}
	res, err := isolate.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	for _, want := range []string{"rw-ok\n", "ro-refused\n", "Read-only file system", "seed\ncode\n", "data-writable\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q does not contain %q", out, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rwDir, "f")); err != nil || string(b) != "a\n" {
		t.Errorf("rw bind: host file = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(roDir, "f")); !os.IsNotExist(err) {
		t.Errorf("ro bind: host file exists (%v)", err)
	}
}

func TestOutputTail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		max       int
		bytes     int
		truncated bool
	}{
		{"truncated to the tail", 1000, 100000, true},
		{"fits", 1000, 990, false},
		{"exactly fits", 1104, 1100, false},
		{"default bound", 0, isolate.DefaultMaxOutput + 11, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := baseSpec(t, "yes 0123456789 | head -c "+strconv.Itoa(tc.bytes)+"; echo END")
			s.MaxOutput = tc.max
			res, err := isolate.Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			limit := tc.max
			if limit == 0 {
				limit = isolate.DefaultMaxOutput
			}
			wantLen := min(limit, tc.bytes+4)
			if len(res.Output) != wantLen || res.Truncated != tc.truncated || !strings.HasSuffix(string(res.Output), "END\n") {
				t.Errorf("len %d truncated %v suffix %q, want len %d truncated %v",
					len(res.Output), res.Truncated, res.Output[max(0, len(res.Output)-20):], wantLen, tc.truncated)
			}
		})
	}
}

// A root caller runs the sandbox as a real unprivileged host user: its own
// files are writable inside, root's are not, and its writes land as that uid.
func TestHostUser(t *testing.T) {
	need.Root(t, "switching to another host uid")
	requireSandbox(t)
	root := newRootfs(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(ws, 1000, 1000)
	os.Mkdir(filepath.Join(root, "ws"), 0o755) // mount point: the host user cannot create it
	// The host user must reach both trees: open their test folders up to /tmp.
	for _, d := range []string{root, filepath.Dir(root), filepath.Dir(filepath.Dir(root)), filepath.Dir(ws), filepath.Dir(filepath.Dir(ws))} {
		os.Chmod(d, 0o755)
	}
	res, err := isolate.Run(context.Background(), isolate.Spec{
		Root:     root,
		Mounts:   []isolate.Mount{{Source: ws, Target: "/ws"}},
		HostUser: &isolate.User{UID: 1000, GID: 1000},
		Argv:     []string{"/bin/sh", "-c", "id -u; touch /ws/mine; touch /bin/x 2>/dev/null && echo wrote-root || echo root-refused"},
		Env:      isolate.Env{"PATH": "/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Output); res.ExitCode != 0 || got != "1000\nroot-refused\n" {
		t.Fatalf("exit %d output %q", res.ExitCode, got)
	}
	fi, err := os.Stat(filepath.Join(ws, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 {
		t.Fatalf("file owned by %d on the host", st.Uid)
	}
	if _, err := isolate.Run(context.Background(), isolate.Spec{Root: root, Argv: []string{"true"}, HostUser: &isolate.User{UID: 1000}, Caps: isolate.BuildCaps()}); !errors.Is(err, isolate.ErrInvalidSpec) {
		t.Fatalf("HostUser with caps: %v", err)
	}
}
