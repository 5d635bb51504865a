// Package isolate runs one command under bubblewrap (bwrap) with declared
// mounts, network, namespaces and resource limits.
//
// It is the one place Slipway sandboxes a process on a local host: the
// workspace-template build runs build steps and smoke tests on an unpacked
// root file system with Run, and the local sandbox backend keeps long-lived
// sandboxes (a runner process beside the workload) with Start, which returns
// a Process to Wait for, Signal or Kill.
//
// A Spec declares everything the command sees, and its zero values are the
// locked-down choices. Every sandbox gets its own pid, ipc, uts and (where
// the kernel has one) cgroup namespace; a network namespace holding only
// loopback unless Spec.Network; a fresh /proc and a minimal /dev; a tmpfs at
// /tmp unless the caller mounts one; no capabilities unless Spec.Caps keeps
// some (see BuildCaps for package installs); exactly the environment in
// Spec.Env; a host name (DefaultHostname) and working directory
// (DefaultDir) that do not depend on the host; the seccomp filter of
// package seccomp (Docker's default profile for the capabilities kept),
// which bwrap loads just before it runs the command (--seccomp); and,
// unless it keeps host capabilities as a root build step does, a user
// namespace of its own in which no other can be made (--unshare-user
// --disable-userns). Spec.UnsafeNoSeccomp turns both off. bwrap runs with
// --die-with-parent and --new-session. Resource limits are rlimits set on
// bwrap before it reads its options (prlimit(2), or prlimit(1) from
// util-linux for a setuid bwrap); the wall-clock Timeout and context cancellation kill
// bwrap's process group and the sandbox's pid 1, which takes its whole pid
// namespace with it. Run and Process.Wait return only once no process of the
// sandbox is left, including background processes of a command that exited
// normally.
//
// Environment values may be secrets. They reach bwrap through a pipe
// (--args), not its command line, so they do not show in the host's
// /proc/<pid>/cmdline. Every other option of bwrap goes the same way, so
// that its command line is only "bwrap --args 3 -- ARGV...": the sandbox's
// pid 1 (a fork of bwrap, whose command line every process inside can
// read) shows no host path, neither Root nor a mount source. Every rendering of a command (Result.Command,
// Process.Command, errors, Spec.String, fmt's %v and %#v of a Spec or Env)
// shows names only. Argv is shown as is: pass secrets through Env or a
// mounted file.
//
// When the caller is root and Spec.User is unset, the command runs as host
// root confined by the mounts and namespaces: a writable Root can receive
// setuid-root files (and device nodes, if Caps keeps CAP_MKNOD); bind mounts
// are nosuid and nodev inside the sandbox but not on the host, so keep Root
// in a directory other users cannot reach. When the caller is not root, bwrap always uses a user
// namespace and the command has no power beyond the caller's.
//
// Aggregate limits (CPU, memory, processes over the whole sandbox) come
// from cgroups: DetectCgroups finds the controllers this process may use
// (the cgroup v2 tree where it is delegated, else the cgroup v1 cpu, memory
// and pids hierarchies), Cgroups.New makes one sandbox's cgroup, and
// Spec.Cgroup puts bwrap in it before bwrap reads its options, so no
// process of the sandbox starts outside it. On cgroup v1 Start's thread
// forks bwrap from inside the cgroup and goes back (cgroupstart.go): moving
// a running process in would wait for an RCU grace period, about 10 ms a
// sandbox. Cgroup.Events counts OOM kills and refused forks.
//
// It is not a security boundary against kernel exploits (no seccomp filter,
// no LSM profile) and not a container runtime: it does not pull or
// unpack images (see package rootfs) nor set up networking beyond
// loopback-only or the host's.
package isolate
