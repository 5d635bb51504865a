// Package local is the sandbox backend for one host: each sandbox is a
// long-lived bubblewrap sandbox (package isolate) running the runner, with
// its durable state in a directory.
//
// # What a sandbox is
//
// The template image is unpacked once per digest (package rootfs; callers
// creating sandboxes of the same template at once wait for the one
// extraction) and mounted read-only as / of every sandbox of that template.
// Each sandbox gets a private writable workspace at the template's working
// directory (DefaultWorkdir when it names none), seeded with that
// directory's contents and owned by the sandbox's user; a tmpfs at /tmp
// and another at sandbox.CredentialDir;
// the runner binary read-only at sandbox.RunnerPath; no network (a network
// namespace with only loopback; for sandbox.NetworkAllowList, an egress
// proxy of package egress per sandbox on a unix socket in its state
// directory, bound in read-only at /run/slipway/egress and forwarded by
// the runner to sandbox.EgressProxyAddr, which HTTP_PROXY and HTTPS_PROXY
// name; WithEgressRecorder receives its attempts); pid, ipc and uts namespaces of its own
// (the host's processes are invisible, the host name is the sandbox id); no
// capabilities; the seccomp filter of package isolate/seccomp on every
// process and a user namespace in which none can be nested
// (--disable-userns; WithUnsafeNoSeccomp turns both off, for benchmarks
// and debugging only); a runner the workload cannot trace or read
// (non-dumpable); and the Spec's rlimits. A template whose config names a
// user ("uid[:gid]") runs as that uid for real when the backend runs as
// root (an unprivileged bubblewrap), as the template's tests did. That uid
// must be able to search every directory from / down to the state
// directory: the directories the Backend creates are 0711 (parents
// included, whatever the umask), and Create (and CheckTemplate, for a
// check up front) refuses with ErrUnreachable, naming the directory that
// is closed and its mode, rather than let bwrap fail on a path it cannot
// reach.
// Everything outside the workspace and /tmp is read-only.
//
// The refresh phase runs before the runner starts: a fresh /etc/machine-id
// for every sandbox (and /var/lib/dbus/machine-id when the template has
// one), a fresh random seed when the template's refresh label asks and it
// has /var/lib/systemd/random-seed, and new ssh host keys when it asks and
// has ssh-keygen and /etc/ssh: the template's own ssh-keygen -A runs under
// bubblewrap on a private copy of /etc/ssh, mounted read-only over it
// afterwards. What was done, or skipped and why, is in Sandbox.Refresh.
// The refresh phase, the workspace seeding and the environment come from
// package isolate/shape, which the template build uses for its tests too.
//
// # Runner and identity
//
// The backend binds the runner's unix socket itself, at
// sandboxes/<id>/runner.sock in the state directory (outside every
// sandbox), and hands the listening descriptor to the runner as its
// standard input: nothing inside the sandbox can replace the socket, and
// the socket outlives a restart of the Backend. Create returns once the
// runner has answered with the expected digest, generation and sandbox id
// and the host has hashed the executable of the process that answered.
//
// # Credentials
//
// A warm sandbox starts before anyone claims it, so a claim's credentials
// are placed after start: PutCredential writes a file into the sandbox's
// credential tmpfs from the host, through /proc/<pid>/root of the sandbox's
// pid 1 (the path resolved inside the sandbox's root with openat2
// RESOLVE_IN_ROOT, the directory checked to be a tmpfs), as the sandbox's
// user (mode 0400), under a temporary name renamed into place, so a
// symlink planted by the workload is replaced, never followed.
// RemoveCredential unlinks it. The file lives only in the sandbox's memory:
// nothing of it is written to the state directory, and it goes with the
// sandbox's mount namespace when the sandbox is deleted.
//
// # Durable state
//
//	<dir>/lock                          held (flock) by the one Backend using <dir>
//	<dir>/templates/<hex>/rootfs        an unpacked template, shared read-only
//	<dir>/runners/<hex>/slipway-runner  a runner binary, checked against its digest
//	<dir>/sandboxes/<id>/sandbox.json   pool, generation, first owner, pins, pids, refresh results
//	<dir>/sandboxes/<id>  xattr user.slipway.owner: the owner since the last SetOwner
//	<dir>/sandboxes/<id>/workspace/     the sandbox's writable workspace
//	<dir>/sandboxes/<id>/refresh/       machine-id and friends, mounted read-only
//	<dir>/sandboxes/<id>/runner.sock    the runner's socket
//
// SetOwner records the new owner in one setxattr on the sandbox's
// directory, where the state directory's file system takes user xattrs
// (New finds out), and otherwise by replacing sandbox.json; readers take
// the attribute over the record's owner. Either way the owner is in the
// kernel when SetOwner returns, so it survives the process (not a host
// crash, which the sandbox does not survive either).
//
// sandbox.json is written atomically before the sandbox starts and again
// with the host pids and start times of bwrap and of the sandbox's pid 1
// (and the boot id), so that a new Backend tells a running sandbox from a
// dead one whose pid was reused. A new Backend on the same directory finds
// running sandboxes (and can use and delete them) and dead ones (which
// sandbox.Reap deletes). Delete kills the sandbox's pid 1, which takes its
// whole pid namespace, and bwrap's process group, waits until they are
// gone, then removes the directory; a deletion a crash interrupted is
// finished by the next New.
//
// # Limits
//
// bwrap runs with --die-with-parent: sandboxes do not outlive the process
// that created them, so a runtime killed with SIGKILL leaks no sandbox, and
// the next Backend finds them dead. Limits.NoFile is applied by the
// runner, which lowers its own RLIMIT_NOFILE before it serves (every
// command inherits it; no privilege needed, whatever the sandbox's uid);
// the other rlimits are set on bwrap and are per process (NProc counts
// the uid's processes host-wide). The
// aggregate limits are enforced where the host allows and refused
// (ErrInvalidSpec, naming the limit) where it does not, never dropped:
// CPU, memory and pids by a cgroup per sandbox (package isolate: the
// cgroup v2 tree where it is delegated, else the v1 cpu, memory and pids
// hierarchies, under the backend's own cgroup in a "slipway" directory),
// which bwrap joins before it starts anything; the workspace by a tmpfs of
// that size (root only) that bwrap mounts in the sandbox's own mount
// namespace, seeded from the host through /proc/<pid>/root once the runner
// answers, and gone with the sandbox's processes (never on the host's
// mount table, whose lock would serialise concurrent creates and
// deletes; with a template user, its entries all belong to that user,
// the one owner the sandbox's user namespace maps; its pages count against
// the memory limit, so it may be at most half of it). /tmp, /dev/shm and
// the credential tmpfs are sized too (sandbox.TmpBytes). Enforcement says
// which limits hold here, each proved at New on a probe (a probe cgroup,
// a probe process lowering its own RLIMIT_NOFILE) and read back; Applied
// reads back what a sandbox has from the kernel; LimitEvents
// reads the OOM kills, refused forks, throttled CPU periods and a full
// workspace, from which sandbox.Outcome names the limit that ended a
// command. WithoutCgroups turns cgroups off. The listening socket is inherited by bwrap's pid 1 inside the
// sandbox (bwrap keeps standard input there), so a workload of the
// sandbox's uid could take it with pidfd_getfd and answer in the runner's
// place after Create: treat the runner's later answers as the sandbox's
// word. A workload can always signal its own runner. Templates are never
// removed from the state directory yet.
package local
