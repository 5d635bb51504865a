package isolate

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// File descriptors bwrap gets besides stdio (exec.Cmd.ExtraFiles start at 3).
const (
	argsFD = 3 // --args: every bwrap option, NUL-separated, the environment first
	infoFD = 4 // --info-fd: bwrap writes the sandbox's host pid here
	// --seccomp: the filter's BPF program, which bwrap loads in the
	// sandbox just before it runs the command
	seccompFD = 5
)

// command is the host command that runs a Spec: bwrap, after prlimit when
// prlimit(1) sets the Limits (see rlimit.go). bwrap's options (mounts, namespaces, the environment) travel in
// the --args payload written through argsFD, and its command line is only
// "bwrap --args 3 -- ARGV...". So the environment's values never appear in
// /proc/<pid>/cmdline on the host (readable by every user) nor in the
// environment of prlimit and bwrap themselves (where LD_PRELOAD or
// LD_LIBRARY_PATH meant for the sandbox would apply to host binaries), and
// no host path (the root, mount sources) shows in the command line of the
// sandbox's pid 1, a fork of bwrap that every process inside can read.
type command struct {
	argv    []string // argv[0] is the path of prlimit or bwrap
	bwrapAt int      // index of bwrap in argv
	envArgs []string // --clearenv, then --setenv NAME VALUE per variable, sorted
	opts    []string // the other options, in the --args payload after envArgs
}

// buildCommand renders a validated s for the given bwrap and prlimit paths
// (prlimit "": Start sets the Limits itself), filling in DefaultHostname
// and DefaultDir. It is deterministic.
func buildCommand(s *Spec, bwrap, prlimit string) command {
	var argv []string
	if l := s.Limits; l != (Limits{}) && prlimit != "" {
		argv = append(argv, prlimit)
		for _, f := range []struct {
			flag string
			v    uint64
		}{{"--nofile", l.NoFile}, {"--nproc", l.NProc}, {"--as", l.AddressSpace}, {"--cpu", l.CPUSeconds}, {"--fsize", l.FileSize}} {
			if f.v != 0 {
				argv = append(argv, f.flag+"="+strconv.FormatUint(f.v, 10))
			}
		}
		argv = append(argv, "--")
	}
	bwrapAt := len(argv)
	// bwrap takes options only from an --args payload, not the command:
	// that stays on the command line.
	argv = append(argv, bwrap, "--args", strconv.Itoa(argsFD), "--")
	argv = append(argv, s.Argv...)

	opts := []string{"--info-fd", strconv.Itoa(infoFD),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if !s.Network {
		opts = append(opts, "--unshare-net")
	}
	if u := s.User; u != nil {
		opts = append(opts, "--unshare-user", "--uid", strconv.Itoa(u.UID), "--gid", strconv.Itoa(u.GID))
	}
	if disableUserns(s) {
		if s.User == nil {
			// The caller's own uid, mapped onto itself: a user namespace
			// of one id, for --disable-userns to stand on.
			opts = append(opts, "--unshare-user")
		}
		opts = append(opts, "--disable-userns")
	}
	if withSeccomp(s) {
		opts = append(opts, "--seccomp", strconv.Itoa(seccompFD))
	}
	opts = append(opts, "--die-with-parent", "--new-session")
	hostname := s.Hostname
	if hostname == "" {
		hostname = DefaultHostname
	}
	opts = append(opts, "--hostname", hostname)
	if s.ReadOnlyRoot {
		opts = append(opts, "--ro-bind", s.Root, "/")
	} else {
		opts = append(opts, "--bind", s.Root, "/")
	}
	opts = append(opts, "--proc", "/proc", "--dev", "/dev")
	opts = append(opts, mountArgs(s)...)
	opts = append(opts, "--cap-drop", "ALL")
	for _, c := range s.Caps {
		opts = append(opts, "--cap-add", c)
	}
	dir := s.Dir
	if dir == "" {
		dir = DefaultDir
	}
	opts = append(opts, "--chdir", dir)

	envArgs := []string{"--clearenv"}
	for _, k := range s.Env.keys() {
		envArgs = append(envArgs, "--setenv", k, s.Env[k])
	}
	return command{argv: argv, bwrapAt: bwrapAt, envArgs: envArgs, opts: opts}
}

// withSeccomp says whether the sandbox runs under the seccomp filter.
func withSeccomp(s *Spec) bool { return !s.UnsafeNoSeccomp && !s.noSeccompOnly }

// disableUserns says whether the sandbox gets --disable-userns (bwrap
// makes a user namespace for it, of the caller's uid unless User says
// otherwise, and forbids nested ones). Not for a root caller's sandbox
// that keeps host capabilities (a build step's BuildCaps): a user
// namespace of one id would take them away, and the filter refuses user
// namespaces there (unshare and namespace flags to clone need
// CAP_SYS_ADMIN, which BuildCaps lacks).
func disableUserns(s *Spec) bool {
	if s.UnsafeNoSeccomp || s.noDisableUsernsOnly {
		return false
	}
	return s.User != nil || s.HostUser != nil || len(s.Caps) == 0
}

// mountArgs orders the tmpfs at /tmp, Mounts and Tmpfs by the depth of their
// targets (stable, so declaration order breaks ties): a parent is mounted
// before anything under it, whatever order the caller listed them in.
func mountArgs(s *Spec) []string {
	type mnt struct{ args []string }
	var ms []mnt
	tmp := true
	for _, m := range s.Mounts {
		flag := "--bind"
		if m.ReadOnly {
			flag = "--ro-bind"
		}
		ms = append(ms, mnt{[]string{flag, m.Source, m.Target}})
		tmp = tmp && m.Target != "/tmp"
	}
	for _, t := range s.Tmpfs {
		ms = append(ms, mnt{[]string{"--tmpfs", t}})
		tmp = tmp && t != "/tmp"
	}
	for _, t := range s.Sized {
		mode := t.Mode
		if mode == 0 {
			mode = 0o755
		}
		bits := uint64(mode.Perm())
		if mode&os.ModeSticky != 0 {
			bits |= 0o1000
		}
		ms = append(ms, mnt{[]string{"--perms", "0" + strconv.FormatUint(bits, 8), "--size", strconv.FormatUint(t.Bytes, 10), "--tmpfs", t.Target}})
		tmp = tmp && t.Target != "/tmp"
	}
	if tmp {
		ms = slices.Insert(ms, 0, mnt{[]string{"--tmpfs", "/tmp"}})
	}
	target := func(m mnt) string { return m.args[len(m.args)-1] }
	slices.SortStableFunc(ms, func(a, b mnt) int {
		return strings.Count(target(a), "/") - strings.Count(target(b), "/")
	})
	var out []string
	for _, m := range ms {
		out = append(out, m.args...)
	}
	return out
}

// argsData is the --args payload: NUL-terminated options.
func (c command) argsData() []byte {
	var b strings.Builder
	for _, a := range slices.Concat(c.envArgs, c.opts) {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return []byte(b.String())
}

// redacted is the argv as bwrap effectively sees it, with --args expanded
// and every environment value replaced: safe for logs and errors.
func (c command) redacted() []string {
	return slices.Concat(c.argv[:c.bwrapAt+1], redactEnvArgs(c.envArgs), c.opts, c.argv[c.bwrapAt+3:])
}

func redactEnvArgs(envArgs []string) []string {
	out := slices.Clone(envArgs)
	for i := 0; i+2 < len(out); i++ {
		if out[i] == "--setenv" {
			out[i+2] = redacted
			i += 2
		}
	}
	return out
}

// shellJoin quotes argv for a POSIX shell, for display only.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
