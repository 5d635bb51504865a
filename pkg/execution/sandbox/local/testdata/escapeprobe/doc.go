// Command escapeprobe tries one way out of a sandbox with the system call
// itself, where the test templates hold no tool for it (no keyctl, no
// strace). It is built static by the escape tests and bound into the
// sandbox. It prints what happened and exits 0 when the attempt
// succeeded (an escape), 1 when it was refused, 2 on a usage error.
//
//	escapeprobe keyring          add_key to the session keyring, read the uid's keyring
//	escapeprobe userns           clone a child in a new user namespace
//	escapeprobe ptrace PID       PTRACE_ATTACH to PID
//	escapeprobe vmread PID       process_vm_readv 4 bytes at 0x400000 (a static Go binary's ELF header)
//	escapeprobe ptrace-child     PTRACE_ATTACH to a child of its own (no other lock than the filter)
//	escapeprobe perf             perf_event_open of a software clock for itself
//	escapeprobe bpf              bpf(BPF_MAP_CREATE) of a small array
//	escapeprobe sleep            sleeps (the child ptrace-child attaches to)
//
// It is testdata, not a package of the tree: the escape tests build it; nothing else imports or runs it.
package main
