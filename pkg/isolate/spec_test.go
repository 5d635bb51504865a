package isolate_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/pkg/isolate"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "x")
	const secret = "hunter2"
	cases := []struct {
		name  string
		edit  func(*isolate.Spec)
		field string // "" means valid
	}{
		{"valid", func(*isolate.Spec) {}, ""},
		{"valid with everything", func(s *isolate.Spec) {
			s.Mounts = []isolate.Mount{{Source: file, Target: "/etc/f", ReadOnly: true}}
			s.Tmpfs, s.Dir, s.Hostname = []string{"/scratch"}, "/work", "build-1.example"
			s.User, s.Caps = &isolate.User{UID: 1000, GID: 1000}, isolate.BuildCaps()
		}, ""},
		{"root missing", func(s *isolate.Spec) { s.Root = "" }, "Root: required"},
		{"root relative", func(s *isolate.Spec) { s.Root = "rootfs" }, "Root:"},
		{"root unclean", func(s *isolate.Spec) { s.Root = dir + "/../" + filepath.Base(dir) }, "Root:"},
		{"root absent", func(s *isolate.Spec) { s.Root = filepath.Join(dir, "absent") }, "Root:"},
		{"root a file", func(s *isolate.Spec) { s.Root = file }, "Root:"},
		{"mount source relative", func(s *isolate.Spec) { s.Mounts = []isolate.Mount{{Source: "src", Target: "/src"}} }, "Mounts[0].Source"},
		{"mount source absent", func(s *isolate.Spec) {
			s.Mounts = []isolate.Mount{{Source: dir, Target: "/a"}, {Source: filepath.Join(dir, "absent"), Target: "/b"}}
		}, "Mounts[1].Source"},
		{"mount over root", func(s *isolate.Spec) { s.Mounts = []isolate.Mount{{Source: dir, Target: "/"}} }, "Mounts[0].Target"},
		{"mount target relative", func(s *isolate.Spec) { s.Mounts = []isolate.Mount{{Source: dir, Target: "src"}} }, "Mounts[0].Target"},
		{"tmpfs relative", func(s *isolate.Spec) { s.Tmpfs = []string{"tmp"} }, "Tmpfs[0]"},
		{"sized tmpfs relative", func(s *isolate.Spec) { s.Sized = []isolate.SizedTmpfs{{Target: "w", Bytes: 1 << 20}} }, "Sized[0].Target"},
		{"sized tmpfs under a page", func(s *isolate.Spec) { s.Sized = []isolate.SizedTmpfs{{Target: "/w", Bytes: 100}} }, "Sized[0].Bytes"},
		{"sized tmpfs mode", func(s *isolate.Spec) {
			s.Sized = []isolate.SizedTmpfs{{Target: "/w", Bytes: 1 << 20, Mode: os.ModeSetuid | 0o700}}
		}, "Sized[0].Mode"},
		{"dir relative", func(s *isolate.Spec) { s.Dir = "work" }, "Dir:"},
		{"hostname characters", func(s *isolate.Spec) { s.Hostname = "bad name" }, "Hostname:"},
		{"hostname length", func(s *isolate.Spec) { s.Hostname = strings.Repeat("h", 65) }, "Hostname:"},
		{"no argv", func(s *isolate.Spec) { s.Argv = nil }, "Argv:"},
		{"empty command", func(s *isolate.Spec) { s.Argv = []string{""} }, "Argv:"},
		{"NUL in argv", func(s *isolate.Spec) { s.Argv = []string{"sh", "a\x00b"} }, "Argv[1]"},
		{"env name with =", func(s *isolate.Spec) { s.Env["A=B"] = "c" }, "Env:"},
		{"env name empty", func(s *isolate.Spec) { s.Env[""] = "c" }, "Env:"},
		{"env value with NUL", func(s *isolate.Spec) { s.Env["TOKEN"] = secret + "\x00" }, `Env["TOKEN"]`},
		{"negative timeout", func(s *isolate.Spec) { s.Timeout = -1 }, "Timeout:"},
		{"negative max output", func(s *isolate.Spec) { s.MaxOutput = -1 }, "MaxOutput:"},
		{"negative uid", func(s *isolate.Spec) { s.User = &isolate.User{UID: -1} }, "User.UID"},
		{"gid out of range", func(s *isolate.Spec) { s.User = &isolate.User{GID: 1 << 32} }, "User.GID"},
		{"capability ALL", func(s *isolate.Spec) { s.Caps = []string{"ALL"} }, "Caps[0]"},
		{"capability lower case", func(s *isolate.Spec) { s.Caps = []string{"CAP_CHOWN", "cap_kill"} }, "Caps[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := isolate.Spec{Root: dir, Env: isolate.Env{"PATH": "/bin"}, Argv: []string{"true"}}
			tc.edit(&s)
			err := s.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field == "":
			case !errors.Is(err, isolate.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.field):
				t.Fatalf("Validate = %v, want ErrInvalidSpec naming %s", err, tc.field)
			case strings.Contains(err.Error(), secret):
				t.Fatalf("error shows an env value: %v", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := isolate.Spec{Root: "rel", Dir: "rel", Timeout: -1}.Validate()
	for _, field := range []string{"Root:", "Dir:", "Argv:", "Timeout:"} {
		if !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("%v does not name %s", err, field)
		}
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	s := isolate.Spec{
		Root:         "/r",
		ReadOnlyRoot: true,
		// /data/src is listed before /data, and /rw before both: the command
		// mounts parents first and otherwise keeps the declared order.
		Mounts:   []isolate.Mount{{Source: "/src", Target: "/data/src", ReadOnly: true}, {Source: "/host rw", Target: "/rw"}},
		Tmpfs:    []string{"/data"},
		Env:      isolate.Env{"TOKEN": "s3cret", "PATH": "/bin"},
		Dir:      "/work",
		Hostname: "h",
		Argv:     []string{"sh", "-c", "echo 'hi'"},
		Limits:   isolate.Limits{NoFile: 64, CPUSeconds: 5},
		User:     &isolate.User{UID: 1000, GID: 1000},
		Caps:     []string{"CAP_CHOWN"},
	}
	const want = "prlimit --nofile=64 --cpu=5 -- bwrap --clearenv --setenv PATH '<redacted>' --setenv TOKEN '<redacted>' " +
		"--info-fd 4 --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net " +
		"--unshare-user --uid 1000 --gid 1000 --disable-userns --seccomp 5 --die-with-parent --new-session --hostname h " +
		"--ro-bind /r / --proc /proc --dev /dev --tmpfs /tmp --bind '/host rw' /rw --tmpfs /data --ro-bind /src /data/src " +
		"--cap-drop ALL --cap-add CAP_CHOWN --chdir /work -- sh -c 'echo '\\''hi'\\'''"
	if got := s.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}

	s.Network, s.User, s.Limits, s.Caps, s.Tmpfs, s.Mounts = true, nil, isolate.Limits{}, nil, []string{"/tmp"}, nil
	got := s.String()
	for _, absent := range []string{"prlimit", "--unshare-net", "--uid", "--cap-add", "--tmpfs /tmp --tmpfs /tmp"} {
		if strings.Contains(got, absent) {
			t.Errorf("String() = %s, has %q", got, absent)
		}
	}
	// No User and no capability kept: a user namespace of the caller's
	// own uid, so that none can be made inside.
	if !strings.Contains(got, " --unshare-user --disable-userns --seccomp 5 ") {
		t.Errorf("String() = %s, without a user namespace that forbids more", got)
	}
	// A root build step keeps host capabilities: no user namespace, the
	// filter (with the capabilities' rules) only.
	s.Caps = isolate.BuildCaps()
	if got := s.String(); strings.Contains(got, "--unshare-user") || strings.Contains(got, "--disable-userns") || !strings.Contains(got, "--seccomp 5") {
		t.Errorf("String() with BuildCaps = %s", got)
	}
	s.Caps, s.UnsafeNoSeccomp = nil, true
	if got := s.String(); strings.Contains(got, "--seccomp") || strings.Contains(got, "userns") {
		t.Errorf("String() with UnsafeNoSeccomp = %s", got)
	}
}

func TestPrintingRedactsEnv(t *testing.T) {
	t.Parallel()
	s := isolate.Spec{Root: "/r", Env: isolate.Env{"TOKEN": "s3cret"}, Argv: []string{"true"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, x := range []any{s, &s, s.Env} {
			got := fmt.Sprintf(verb, x)
			if strings.Contains(got, "s3cret") || !strings.Contains(got, "TOKEN") {
				t.Errorf("Sprintf(%s, %T) = %s", verb, x, got)
			}
		}
	}
}
