package seccomp

import (
	"errors"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	moby "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Linux's clone flags that make a namespace (the kernel's values on every
// architecture).
const (
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	afVsock        = 40
	afInet         = 2
	afNetlink      = 16
	afUnix         = 1
)

func compile(t *testing.T, opts ...Option) *Filter {
	t.Helper()
	f, err := Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestVerdicts reads the compiled program: what a sandbox without
// capabilities may and may not call.
func TestVerdicts(t *testing.T) {
	f := compile(t)
	eperm, enosys := syscall.EPERM, syscall.ENOSYS
	cases := []struct {
		name  string
		args  []uint64
		errno syscall.Errno // 0: allowed
	}{
		// What Go's runtime, a shell and the runner need.
		{"read", nil, 0}, {"write", nil, 0}, {"futex", nil, 0}, {"mmap", nil, 0}, {"rt_sigaction", nil, 0},
		{"execve", nil, 0}, {"wait4", nil, 0}, {"epoll_pwait", nil, 0}, {"openat", nil, 0}, {"prlimit64", nil, 0},
		{"pidfd_open", nil, 0}, {"pidfd_send_signal", nil, 0}, {"setsid", nil, 0}, {"sched_getaffinity", nil, 0},
		{"clone", []uint64{uint64(syscall.SIGCHLD)}, 0},
		{"clone", []uint64{syscall.CLONE_VM | syscall.CLONE_FS | syscall.CLONE_FILES | syscall.CLONE_SIGHAND | syscall.CLONE_THREAD | syscall.CLONE_SYSVSEM}, 0},
		{"socket", []uint64{afUnix}, 0}, {"socket", []uint64{afInet}, 0}, {"socket", []uint64{afNetlink}, 0},
		{"personality", []uint64{0}, 0}, {"personality", []uint64{0xffffffff}, 0},
		// The kernel keyring.
		{"keyctl", nil, eperm}, {"add_key", nil, eperm}, {"request_key", nil, eperm},
		// Namespaces.
		{"unshare", []uint64{cloneNewUser}, eperm}, {"unshare", []uint64{cloneNewNS}, eperm}, {"setns", nil, eperm},
		{"clone", []uint64{cloneNewUser | uint64(syscall.SIGCHLD)}, eperm},
		{"clone", []uint64{cloneNewNS}, eperm}, {"clone", []uint64{cloneNewNet}, eperm}, {"clone", []uint64{cloneNewPID}, eperm},
		{"clone", []uint64{cloneNewUTS}, eperm}, {"clone", []uint64{cloneNewIPC}, eperm}, {"clone", []uint64{cloneNewCgroup}, eperm},
		{"clone", []uint64{1<<32 | cloneNewUser}, eperm}, // the high word does not hide the flag
		{"clone3", nil, enosys},
		// Other processes.
		{"ptrace", nil, eperm}, {"process_vm_readv", nil, eperm}, {"process_vm_writev", nil, eperm},
		{"kcmp", nil, eperm}, {"pidfd_getfd", nil, eperm},
		// Mounts, kernel, time, modules, tracing.
		{"mount", nil, eperm}, {"umount2", nil, eperm}, {"pivot_root", nil, eperm}, {"chroot", nil, eperm},
		{"fsopen", nil, eperm}, {"fsmount", nil, eperm}, {"move_mount", nil, eperm}, {"open_tree", nil, eperm},
		{"bpf", nil, eperm}, {"perf_event_open", nil, eperm}, {"kexec_load", nil, eperm}, {"kexec_file_load", nil, eperm},
		{"init_module", nil, eperm}, {"finit_module", nil, eperm}, {"delete_module", nil, eperm},
		{"reboot", nil, eperm}, {"swapon", nil, eperm}, {"acct", nil, eperm}, {"syslog", nil, eperm},
		{"clock_settime", nil, eperm}, {"settimeofday", nil, eperm}, {"open_by_handle_at", nil, eperm},
		{"userfaultfd", nil, eperm}, {"quotactl", nil, eperm}, {"iopl", nil, eperm}, {"ioperm", nil, eperm},
		{"socket", []uint64{afVsock}, eperm}, {"personality", []uint64{0x0400000}, eperm}, // READ_IMPLIES_EXEC
		{"sethostname", nil, eperm}, {"lookup_dcookie", nil, eperm}, {"mbind", nil, eperm},
	}
	for _, c := range cases {
		v, err := f.Check(c.name, c.args...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := Verdict{Allowed: c.errno == 0, Errno: c.errno}
		if v != want {
			t.Errorf("%s %#x: %v, want %v", c.name, c.args, v, want)
		}
	}
}

// TestForeignABIRefused: a call tagged with another architecture (i386 on
// amd64, arm on arm64) gets the default action whatever its number.
func TestForeignABIRefused(t *testing.T) {
	f := compile(t)
	read := uint32(f.arch.SyscallNames["read"])
	for _, other := range []uint32{0x40000003 /* i386 */, 0x40000028 /* arm */, 0xc000003e /* x86_64 */, 0xc00000b7 /* aarch64 */} {
		if other == uint32(f.arch.ID) {
			continue
		}
		v, err := f.check(read, other)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed {
			t.Errorf("read from arch %#x: allowed", other)
		}
	}
	if runtime.GOARCH == "amd64" {
		v, _ := f.check(read|0x40000000, uint32(f.arch.ID)) // x32
		if v.Allowed {
			t.Error("an x32 read was allowed")
		}
	}
}

// TestCapsWiden: rules Docker keys to a capability come with it.
func TestCapsWiden(t *testing.T) {
	for _, c := range []struct {
		cap, call string
		args      []uint64
	}{
		{"CAP_SYS_CHROOT", "chroot", nil},
		{"CAP_SYS_PTRACE", "ptrace", nil},
		{"CAP_SYS_PTRACE", "process_vm_readv", nil},
		{"CAP_SYS_ADMIN", "mount", nil},
		{"CAP_SYS_ADMIN", "clone", []uint64{cloneNewUser}},
		{"CAP_SYS_ADMIN", "clone3", nil},
		{"CAP_SYS_TIME", "clock_settime", nil},
		{"CAP_BPF", "bpf", nil},
	} {
		without, _ := compile(t).Check(c.call, c.args...)
		with, err := compile(t, WithCaps(c.cap)).Check(c.call, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if without.Allowed || !with.Allowed {
			t.Errorf("%s: without %s %v, with it %v", c.call, c.cap, without, with)
		}
	}
	// The build steps' set (isolate.BuildCaps) keeps keyrings and namespaces shut.
	f := compile(t, WithCaps("CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
		"CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT"))
	for _, call := range []string{"keyctl", "unshare", "mount", "ptrace", "bpf"} {
		if v, _ := f.Check(call); v.Allowed {
			t.Errorf("%s allowed with the build capabilities", call)
		}
	}
}

// TestKernelRules: a rule with a minimum kernel is left out below it.
// (ptrace's 4.8 rule is taken out by Slipway either way; with
// CAP_SYS_PTRACE it is back whatever the kernel.)
func TestKernelRules(t *testing.T) {
	p := &moby.Seccomp{LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno}, Syscalls: []*moby.Syscall{
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow}},
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActAllow}, Includes: &moby.Filter{MinKernel: &moby.KernelVersion{Kernel: 5, Major: 10}}},
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"close"}, Action: specs.ActAllow}, Excludes: &moby.Filter{MinKernel: &moby.KernelVersion{Kernel: 5, Major: 10}}},
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"no_such_call_here"}, Action: specs.ActAllow}},
	}}
	a, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		release string
		want    []string
	}{{"4.19.0-amd64", []string{"close", "read"}}, {"5.10.1", []string{"read", "write"}}, {"6.18.44-fc-v1252", []string{"read", "write"}}} {
		var o options
		if err := withKernel(c.release)(&o); err != nil {
			t.Fatal(err)
		}
		_, allowed, err := translate(p, a, runtime.GOARCH, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(allowed, c.want) {
			t.Errorf("kernel %s: %v, want %v", c.release, allowed, c.want)
		}
	}
}

// TestUntranslatable: a profile this compiler would get wrong is an
// error naming the rule, never a filter that says something else.
func TestUntranslatable(t *testing.T) {
	a, _ := arch.GetInfo("")
	for _, s := range []*moby.Syscall{
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActTrace}},
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0xff, ValueTwo: 1, Op: specs.OpMaskedEqual}}}},
		{LinuxSyscall: specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 7, Value: 1, Op: specs.OpEqualTo}}}},
	} {
		p := &moby.Seccomp{LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno}, Syscalls: []*moby.Syscall{s}}
		if _, _, err := translate(p, a, runtime.GOARCH, options{kernel: &moby.KernelVersion{Kernel: 6}}); !errors.Is(err, ErrProfile) {
			t.Errorf("%v %s: %v, want ErrProfile", s.Names, s.Action, err)
		}
	}
	if _, err := Compile(WithCaps("chown")); !errors.Is(err, ErrProfile) {
		t.Errorf("WithCaps(chown): %v", err)
	}
	if _, err := Compile(withKernel("linux")); !errors.Is(err, ErrProfile) {
		t.Errorf("kernel linux: %v", err)
	}
}

// TestOtherArch: the names of the profile resolve on arm64 too (the
// filter is compiled on the host it runs on; this checks the translation
// for the other architecture Slipway ships).
func TestOtherArch(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		a, err := arch.GetInfo(goarch)
		if err != nil {
			t.Fatal(err)
		}
		groups, allowed, err := translate(moby.DefaultProfile(), a, goarch, options{kernel: &moby.KernelVersion{Kernel: 6, Major: 1}})
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		if len(allowed) < 250 || len(groups) < 2 {
			t.Errorf("%s: %d calls allowed in %d groups", goarch, len(allowed), len(groups))
		}
		for _, n := range []string{"keyctl", "add_key", "request_key", "ptrace", "mount", "bpf", "unshare", "clone", "clone3"} {
			if slices.Contains(allowed, n) {
				t.Errorf("%s: %s allowed unconditionally", goarch, n)
			}
		}
		for _, n := range []string{"read", "futex", "execve", "openat", "epoll_pwait"} {
			if !slices.Contains(allowed, n) {
				t.Errorf("%s: %s not allowed", goarch, n)
			}
		}
	}
}

// FuzzCheck: any call number and arguments give a verdict, never an
// interpreter error, and nothing outside the allow list with argument
// rules is allowed.
func FuzzCheck(f *testing.F) {
	fl, err := Compile()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), uint64(0), uint64(0))
	f.Add(uint32(56), uint64(cloneNewUser), uint64(0))
	f.Fuzz(func(t *testing.T, nr uint32, a0, a1 uint64) {
		v, err := fl.check(nr, uint32(fl.arch.ID), a0, a1)
		if err != nil {
			t.Fatal(err)
		}
		name, known := fl.arch.SyscallNumbers[int(nr)]
		if v.Allowed && (!known || slices.Contains(denied, name) || name == "keyctl" || name == "unshare") {
			t.Fatalf("%d (%s) allowed", nr, name)
		}
		if !v.Allowed && known && slices.Contains(fl.allowed, name) {
			t.Fatalf("%s refused, but it is on the allow list", name)
		}
	})
}
