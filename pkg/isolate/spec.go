package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Named defaults.
const (
	// DefaultMaxOutput is how many bytes of combined stdout and stderr Run
	// keeps when Spec.MaxOutput is 0: the last MiB.
	DefaultMaxOutput = 1 << 20
	// DefaultHostname is the sandbox's host name when Spec.Hostname is empty,
	// so that nothing a build step records depends on the host's name.
	DefaultHostname = "sandbox"
	// DefaultDir is the working directory inside when Spec.Dir is empty.
	DefaultDir = "/"
)

// Error families: one errors.Is covers a class.
var (
	// ErrInvalidSpec is wrapped by every validation error; the message names
	// the Spec field at fault.
	ErrInvalidSpec = errors.New("isolate: invalid spec")
	// ErrUnavailable means bwrap (or prlimit, when it sets limits) is missing
	// or cannot create the namespaces this package needs on this host.
	ErrUnavailable = errors.New("isolate: sandbox unavailable")
)

// Spec declares one command and the sandbox it runs in. The zero value of
// every optional field is the locked-down choice: no network, no
// capabilities, no host environment, a private /tmp.
type Spec struct {
	// Root is the host directory mounted as / (required, absolute).
	Root string
	// ReadOnlyRoot mounts Root read-only. Mount points (for /proc, /dev,
	// /tmp and every Mounts, Tmpfs and Sized target) must then already exist in
	// Root; with a writable root bwrap creates missing ones, leaving empty
	// directories behind in Root.
	ReadOnlyRoot bool
	// Mounts are extra bind mounts of host paths.
	Mounts []Mount
	// Tmpfs lists targets that get a fresh, empty tmpfs. A tmpfs is mounted
	// at /tmp unless /tmp is among Mounts or Tmpfs.
	Tmpfs []string
	// Sized lists targets that get a fresh, empty tmpfs of a fixed size
	// and mode (bwrap --size and --perms). Like every Tmpfs it is mounted
	// in the sandbox's own mount namespace: the host's mount table never
	// holds it, and it goes when the sandbox's last process ends. A full
	// one fails writes with ENOSPC.
	Sized []SizedTmpfs
	// Network shares the host's network namespace. False (the default) gives
	// the sandbox a network namespace of its own holding only loopback.
	Network bool
	// Env is the whole environment of the command; nothing is inherited from
	// the caller. bwrap adds PWD (the working directory). Values never appear
	// on a command line, in an error, or in the String of a Spec.
	Env Env
	// Dir is the working directory inside (absolute); DefaultDir when empty.
	Dir string
	// Hostname is the sandbox's host name; DefaultHostname when empty.
	Hostname string
	// Argv is the command and its arguments; Argv[0] is looked up in the
	// sandbox's PATH (from Env) when it has no slash. Argv is shown in debug
	// output: pass secrets through Env or a mounted file.
	Argv []string
	// Stdin is the command's standard input; nil reads from /dev/null.
	Stdin io.Reader
	// Timeout is a wall-clock deadline after which the sandbox is killed and
	// the Result says TimedOut; 0 means none (the context still applies).
	Timeout time.Duration
	// MaxOutput is how many bytes of combined stdout and stderr Run keeps
	// (the tail); DefaultMaxOutput when 0. Start ignores it.
	MaxOutput int
	// Limits are resource limits (setrlimit) for every process in the
	// sandbox.
	Limits Limits
	// Cgroup, when set, is the cgroup (see Cgroups.New) the sandbox runs
	// in: Start forks bwrap inside it where the host lets a thread move
	// itself there and back (cgroup v1), else moves bwrap into it before
	// bwrap reads its options, so every process of the sandbox is in it
	// from the first. Its limits are aggregate over the sandbox, unlike
	// Limits.
	Cgroup *Cgroup
	// User, when set, runs the command as User.UID and User.GID inside a new
	// user namespace (bwrap --unshare-user). Only that one id is mapped, onto
	// the caller's own: when the caller is root, the command's files are
	// owned by host root (uid 0) while the command holds no capability
	// outside its namespace; otherwise they are owned by the caller. Every
	// other id shows inside as the overflow id (65534). When the caller is
	// not root, bwrap always creates a user namespace and the command runs
	// as the caller's uid unless User says otherwise.
	User *User
	// HostUser, when set, starts the sandbox as this host uid and gid
	// (unprivileged bwrap then maps the same ids in a user namespace of its
	// own): the command is a real unprivileged user, whose own files on the
	// host are its own inside and whose writes land as that uid. Only a root
	// caller can set it; it excludes User and Caps. Root must be reachable
	// by that uid.
	HostUser *User
	// Caps lists the capabilities the command keeps, for example
	// "CAP_CHOWN"; empty (the default) drops them all. See BuildCaps for the
	// set a root build step needs to install packages. Capabilities only
	// mean something for a root command; without User and with a root
	// caller they are host capabilities, limited by the mounts and
	// namespaces of the sandbox.
	Caps []string
	// UnsafeNoSeccomp runs the sandbox without its seccomp filter and lets
	// it make user namespaces (no --seccomp, no --disable-userns): for
	// measuring what they cost and for debugging, never for a workload.
	// By default every process of the sandbox runs under the filter of
	// package seccomp (Docker's default profile for Caps, with Slipway's
	// changes), and a sandbox that has a user namespace or keeps no
	// capability cannot make one (bwrap --unshare-user --disable-userns;
	// not with a setuid bwrap started by a caller other than root, which
	// refuses the option: the filter alone refuses user namespaces there).
	UnsafeNoSeccomp bool

	// Test hooks (export_test.go): leave out one protection only.
	noSeccompOnly, noDisableUsernsOnly bool
}

// Mount is a bind mount of a host path into the sandbox.
type Mount struct {
	Source   string // host path (absolute, must exist)
	Target   string // path inside the sandbox (absolute)
	ReadOnly bool
}

// SizedTmpfs is a tmpfs of Bytes bytes (at least one page) at Target,
// its root directory of mode Mode (permission bits and os.ModeSticky, as
// /tmp has; 0 is 0755, as
// bwrap makes a tmpfs) and owned by the sandbox's root, or by User when
// it is set.
type SizedTmpfs struct {
	Target string
	Bytes  uint64
	Mode   os.FileMode
}

// Limits are per-process resource limits (setrlimit), set on bwrap before
// it reads its options (prlimit(2); prlimit(1) for a setuid bwrap started
// by a caller that is not root) and inherited by everything in the
// sandbox; bwrap itself runs under them, so a tiny NoFile or AddressSpace
// makes bwrap fail before the command starts. Zero leaves a limit as the caller has it. Soft and hard limits are
// both set. They are not an aggregate over the sandbox: that needs a
// writable cgroup v2, which is the sandbox backend's business.
type Limits struct {
	NoFile uint64 // open files (RLIMIT_NOFILE)
	// NProc limits processes of the command's real uid (RLIMIT_NPROC). The
	// kernel counts them per user, not per sandbox: without User, a root
	// caller's count includes every host process of root.
	NProc        uint64
	AddressSpace uint64 // bytes of virtual memory (RLIMIT_AS)
	CPUSeconds   uint64 // CPU seconds per process (RLIMIT_CPU)
	FileSize     uint64 // bytes of the largest file a process may write (RLIMIT_FSIZE)
}

// User is the uid and gid a command runs as inside its user namespace.
type User struct {
	UID, GID int
}

// Env is a sandbox environment. Its String and GoString show the names but
// never the values, so that printing a Spec cannot leak a secret.
type Env map[string]string

// String renders the names with redacted values, sorted.
func (e Env) String() string {
	keys := e.keys()
	for i, k := range keys {
		keys[i] = k + "=" + redacted
	}
	return "[" + strings.Join(keys, " ") + "]"
}

// GoString is String, so that %#v redacts too.
func (e Env) GoString() string { return "isolate.Env" + e.String() }

func (e Env) keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// redacted replaces environment values wherever a command is shown.
const redacted = "<redacted>"

// BuildCaps returns the capabilities a build step running as root inside
// needs to install packages (dpkg and apt chown files, drop to _apt, set
// file capabilities): Docker's default set without CAP_NET_RAW and
// CAP_MKNOD. It returns a new slice on each call.
func BuildCaps() []string {
	return []string{
		"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER",
		"CAP_FSETID", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETFCAP",
		"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
	}
}

// String renders the sandbox as the (redacted) command line that runs it,
// Limits as the prlimit(1) options that set them (Start sets them itself
// unless bwrap is setuid: see Limits).
func (s Spec) String() string {
	return shellJoin(buildCommand(&s, "bwrap", "prlimit").redacted())
}

// GoString is String, so that %#v cannot print Env values.
func (s Spec) GoString() string { return "isolate.Spec{" + s.String() + "}" }

// withDefaults returns a copy of s with the named defaults filled in.
func (s Spec) withDefaults() Spec {
	if s.Dir == "" {
		s.Dir = DefaultDir
	}
	if s.Hostname == "" {
		s.Hostname = DefaultHostname
	}
	if s.MaxOutput == 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	return s
}

// Validate reports every problem with s, each naming its field; all wrap
// ErrInvalidSpec. It reads the file system to check that Root is a
// directory and that mount sources exist.
func (s Spec) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidSpec, field, fmt.Sprintf(format, args...)))
	}
	switch fi, err := os.Stat(s.Root); {
	case s.Root == "":
		bad("Root", "required")
	case !isCleanAbs(s.Root):
		bad("Root", "%q is not a clean absolute path", s.Root)
	case err != nil:
		bad("Root", "%v", err)
	case !fi.IsDir():
		bad("Root", "%q is not a directory", s.Root)
	}
	for i, m := range s.Mounts {
		if !isCleanAbs(m.Source) {
			bad(fmt.Sprintf("Mounts[%d].Source", i), "%q is not a clean absolute path", m.Source)
		} else if _, err := os.Stat(m.Source); err != nil {
			bad(fmt.Sprintf("Mounts[%d].Source", i), "%v", err)
		}
		if msg := checkTarget(m.Target); msg != "" {
			bad(fmt.Sprintf("Mounts[%d].Target", i), "%s", msg)
		}
	}
	for i, t := range s.Tmpfs {
		if msg := checkTarget(t); msg != "" {
			bad(fmt.Sprintf("Tmpfs[%d]", i), "%s", msg)
		}
	}
	for i, t := range s.Sized {
		if msg := checkTarget(t.Target); msg != "" {
			bad(fmt.Sprintf("Sized[%d].Target", i), "%s", msg)
		}
		if t.Bytes < 4096 {
			bad(fmt.Sprintf("Sized[%d].Bytes", i), "%d is under one page (4096)", t.Bytes)
		}
		if t.Mode&^(os.ModePerm|os.ModeSticky) != 0 {
			bad(fmt.Sprintf("Sized[%d].Mode", i), "%v has more than permission bits and sticky", t.Mode)
		}
	}
	if s.Dir != "" && !isCleanAbs(s.Dir) {
		bad("Dir", "%q is not a clean absolute path", s.Dir)
	}
	if len(s.Hostname) > 64 || strings.Trim(s.Hostname, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
		bad("Hostname", "%q is not a host name of at most 64 letters, digits, dots and hyphens", s.Hostname)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		bad("Argv", "a command is required")
	}
	for i, a := range s.Argv {
		if strings.ContainsRune(a, 0) {
			bad(fmt.Sprintf("Argv[%d]", i), "contains a NUL byte")
		}
	}
	for _, k := range s.Env.keys() {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("Env", "name %q is empty or contains '=' or NUL", k)
		}
		if strings.ContainsRune(s.Env[k], 0) {
			bad(fmt.Sprintf("Env[%q]", k), "value contains a NUL byte") // never the value itself
		}
	}
	if s.Timeout < 0 {
		bad("Timeout", "%s is negative", s.Timeout)
	}
	if s.MaxOutput < 0 {
		bad("MaxOutput", "%d is negative", s.MaxOutput)
	}
	if u := s.User; u != nil {
		if u.UID < 0 || u.UID > maxID {
			bad("User.UID", "%d is out of range", u.UID)
		}
		if u.GID < 0 || u.GID > maxID {
			bad("User.GID", "%d is out of range", u.GID)
		}
	}
	if u := s.HostUser; u != nil {
		if u.UID < 0 || u.UID > maxID || u.GID < 0 || u.GID > maxID {
			bad("HostUser", "%d:%d is out of range", u.UID, u.GID)
		}
		if s.User != nil {
			bad("HostUser", "set either User or HostUser, not both")
		}
		if len(s.Caps) > 0 {
			bad("HostUser", "an unprivileged host user keeps no capabilities; Caps must be empty")
		}
	}
	for i, c := range s.Caps {
		if len(c) <= len("CAP_") || !strings.HasPrefix(c, "CAP_") || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
			bad(fmt.Sprintf("Caps[%d]", i), "%q is not a capability name like CAP_CHOWN", c)
		}
	}
	return errors.Join(errs...)
}

// maxID is the largest uid or gid a user namespace can map (2^32-2).
const maxID = 1<<32 - 2

func isCleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}

func checkTarget(t string) string {
	switch {
	case !isCleanAbs(t):
		return fmt.Sprintf("%q is not a clean absolute path", t)
	case t == "/":
		return "cannot mount over /"
	}
	return ""
}
