// Package seccomp compiles the system call filter every process of a
// Slipway sandbox runs under: Docker's and containerd's default profile
// (github.com/moby/profiles/seccomp's DefaultProfile), with Slipway's
// changes named in this package, assembled by a pure-Go BPF compiler
// (github.com/elastic/go-seccomp-bpf) into the classic BPF program that
// bubblewrap's --seccomp FD and seccomp(2) take. No cgo, no libseccomp.
//
// The profile is evaluated as Docker evaluates it for a container: rules
// keyed to a capability are included when the sandbox keeps that
// capability (WithCaps), rules keyed to an architecture when it is the
// host's, rules keyed to a minimum kernel when the running kernel is at
// least that. What stays out of the allow list fails with EPERM, among
// them keyctl, add_key and request_key (the kernel keyring is per uid, not
// per sandbox), unshare, setns, mount and the new mount API, bpf,
// perf_event_open, kexec_load, init_module, open_by_handle_at, reboot and
// clock_settime; clone is allowed only without namespace flags
// (CLONE_NEWUSER among them) and clone3, whose flags a filter cannot read,
// fails with ENOSYS so that the C library falls back to clone.
//
// Slipway's changes to Docker's default:
//   - ptrace, process_vm_readv and process_vm_writev are refused unless the
//     sandbox keeps CAP_SYS_PTRACE (Docker allows them on kernels since
//     4.8). A sandbox's runner shares the workload's uid and pid namespace;
//     the runner makes itself non-dumpable, and this rule is the second
//     lock. The cost: no strace or gdb inside a sandbox.
//   - only the host's native ABI is allowed: a 32-bit (i386, arm) or x32
//     system call fails with EPERM (ENOSYS for x32), where Docker allows
//     the compatibility ABIs and their long history of kernel bugs.
//
// Nothing is added: Slipway's runner and its workloads need no system call
// Docker's default refuses.
//
// The compiler builds a filter for the architecture it runs on (amd64 and
// arm64 are what Slipway ships); the names of Docker's profile that the
// architecture does not have are left out, as libseccomp does. A Filter
// can be asked for its verdict on one call (Filter.Check), which runs the
// compiled program in a BPF interpreter: tests read the program, not the
// profile.
//
// It is not a loader: it never calls seccomp(2) in this process. Package
// isolate hands the program to bubblewrap, which loads it in the sandbox
// just before it runs the command.
package seccomp
