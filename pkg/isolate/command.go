package isolate

import (
	"slices"
	"strconv"
	"strings"
)

// File descriptors bwrap gets besides stdio (exec.Cmd.ExtraFiles start at 3).
const (
	argsFD = 3 // --args: NUL-separated options read by bwrap, holding the environment
	infoFD = 4 // --info-fd: bwrap writes the sandbox's host pid here
)

// command is the host command that runs a Spec: optionally prlimit, then
// bwrap. The environment travels in envArgs, written to bwrap through
// argsFD, so that its values never appear in /proc/<pid>/cmdline on the host
// (readable by every user) nor in the environment of prlimit and bwrap
// themselves (where LD_PRELOAD or LD_LIBRARY_PATH meant for the sandbox
// would apply to host binaries).
type command struct {
	argv    []string // argv[0] is the path of prlimit or bwrap
	envArgs []string // --clearenv, then --setenv NAME VALUE per variable, sorted
	argsAt  int      // index of "--args" in argv
}

// buildCommand renders a validated s for the given bwrap and prlimit paths,
// filling in DefaultHostname and DefaultDir. It is deterministic.
func buildCommand(s *Spec, bwrap, prlimit string) command {
	var argv []string
	if l := s.Limits; l != (Limits{}) {
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
	argsAt := len(argv) + 1
	argv = append(argv, bwrap,
		"--args", strconv.Itoa(argsFD),
		"--info-fd", strconv.Itoa(infoFD),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if !s.Network {
		argv = append(argv, "--unshare-net")
	}
	if u := s.User; u != nil {
		argv = append(argv, "--unshare-user", "--uid", strconv.Itoa(u.UID), "--gid", strconv.Itoa(u.GID))
	}
	argv = append(argv, "--die-with-parent", "--new-session")
	hostname := s.Hostname
	if hostname == "" {
		hostname = DefaultHostname
	}
	argv = append(argv, "--hostname", hostname)
	if s.ReadOnlyRoot {
		argv = append(argv, "--ro-bind", s.Root, "/")
	} else {
		argv = append(argv, "--bind", s.Root, "/")
	}
	argv = append(argv, "--proc", "/proc", "--dev", "/dev")
	argv = append(argv, mountArgs(s)...)
	argv = append(argv, "--cap-drop", "ALL")
	for _, c := range s.Caps {
		argv = append(argv, "--cap-add", c)
	}
	dir := s.Dir
	if dir == "" {
		dir = DefaultDir
	}
	argv = append(argv, "--chdir", dir, "--")
	argv = append(argv, s.Argv...)

	envArgs := []string{"--clearenv"}
	for _, k := range s.Env.keys() {
		envArgs = append(envArgs, "--setenv", k, s.Env[k])
	}
	return command{argv: argv, envArgs: envArgs, argsAt: argsAt}
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
	for _, a := range c.envArgs {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return []byte(b.String())
}

// redacted is the argv as bwrap effectively sees it, with --args expanded
// and every environment value replaced: safe for logs and errors.
func (c command) redacted() []string {
	out := slices.Clone(c.argv[:c.argsAt])
	out = append(out, redactEnvArgs(c.envArgs)...)
	return append(out, c.argv[c.argsAt+2:]...)
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
