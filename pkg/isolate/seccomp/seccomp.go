package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	bpfc "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	moby "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
)

// ErrProfile is wrapped by every error of Compile: an option that makes no
// sense, or a default profile this compiler cannot translate faithfully
// (an action or argument comparison it does not know: a newer
// moby/profiles/seccomp than it was written for).
var ErrProfile = errors.New("seccomp: profile")

// denied are the calls Slipway takes out of Docker's allow list unless
// the sandbox keeps CAP_SYS_PTRACE (see the package documentation).
var denied = []string{"ptrace", "process_vm_readv", "process_vm_writev"}

// Option configures Compile.
type Option func(*options) error

type options struct {
	caps   []string
	kernel *moby.KernelVersion
}

// WithCaps names the capabilities the sandbox keeps ("CAP_CHOWN"...):
// the rules Docker's profile keys to them are included, as Docker does for
// a container's bounding set. None (the default) includes none of them.
func WithCaps(caps ...string) Option {
	return func(o *options) error {
		for _, c := range caps {
			if !strings.HasPrefix(c, "CAP_") || len(c) == len("CAP_") {
				return fmt.Errorf("%w: WithCaps: %q is not a capability name like CAP_CHOWN", ErrProfile, c)
			}
		}
		o.caps = append(o.caps, caps...)
		return nil
	}
}

// withKernel evaluates minimum-kernel rules against release (as uname -r
// prints it) instead of the running kernel: a test hook.
func withKernel(release string) Option {
	return func(o *options) error {
		k, err := parseRelease(release)
		o.kernel = k
		return err
	}
}

// Filter is a compiled filter for one architecture.
type Filter struct {
	arch    *arch.Info
	prog    []bpf.Instruction
	raw     []bpf.RawInstruction
	allowed []string
}

// Compile translates Docker's default profile, with Slipway's changes, for
// the host's architecture and kernel and assembles it.
func Compile(opts ...Option) (*Filter, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.kernel == nil {
		var u syscall.Utsname
		if err := syscall.Uname(&u); err != nil {
			return nil, fmt.Errorf("seccomp: uname: %w", err)
		}
		k, err := parseRelease(utsString(u.Release[:]))
		if err != nil {
			return nil, err
		}
		o.kernel = k
	}
	a, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	groups, allowed, err := translate(moby.DefaultProfile(), a, runtime.GOARCH, o)
	if err != nil {
		return nil, err
	}
	pol := bpfc.Policy{DefaultAction: bpfc.ActionErrno, Syscalls: groups} // ActionErrno is EPERM
	prog, err := pol.Assemble()
	if err != nil {
		return nil, fmt.Errorf("%w: assemble: %w", ErrProfile, err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("%w: assemble: %w", ErrProfile, err)
	}
	return &Filter{arch: a, prog: prog, raw: raw, allowed: allowed}, nil
}

// entry is what the profile says of one system call name.
type entry struct {
	action bpfc.Action
	always bool                      // allowed whatever the arguments
	conds  []bpfc.ArgumentConditions // else one of these must hold
}

// translate turns profile p into go-seccomp-bpf groups for architecture
// a (goarch is its Go name, as the profile's arch rules spell it). It
// returns the names allowed whatever their arguments too.
func translate(p *moby.Seccomp, a *arch.Info, goarch string, o options) ([]bpfc.SyscallGroup, []string, error) {
	if p.DefaultAction != specs.ActErrno || (p.DefaultErrnoRet != nil && *p.DefaultErrnoRet != uint(syscall.EPERM)) {
		return nil, nil, fmt.Errorf("%w: default action %s is not errno EPERM", ErrProfile, p.DefaultAction)
	}
	ptrace := slices.Contains(o.caps, "CAP_SYS_PTRACE")
	byName := map[string]*entry{}
	for i, s := range p.Syscalls {
		if !applies(s, goarch, o) {
			continue
		}
		var act bpfc.Action
		switch s.Action {
		case specs.ActAllow:
			act = bpfc.ActionAllow
		case specs.ActErrno:
			errno := uint(syscall.EPERM)
			if s.ErrnoRet != nil {
				errno = *s.ErrnoRet
			}
			act = bpfc.ActionErrno | bpfc.Action(errno&0xffff)
		default:
			return nil, nil, fmt.Errorf("%w: syscalls[%d] %v: action %s is not translated", ErrProfile, i, s.Names, s.Action)
		}
		conds, err := conditions(s.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: syscalls[%d] %v: %w", ErrProfile, i, s.Names, err)
		}
		for _, name := range s.Names {
			if _, ok := a.SyscallNames[name]; !ok {
				continue // not a call of this architecture, as libseccomp skips it
			}
			if act == bpfc.ActionAllow && !ptrace && slices.Contains(denied, name) {
				continue // Slipway's change: see the package documentation
			}
			e := byName[name]
			if e == nil {
				e = &entry{action: act}
				byName[name] = e
			} else if e.action != act {
				return nil, nil, fmt.Errorf("%w: syscalls[%d]: %s has two actions, %v and %v", ErrProfile, i, name, e.action, act)
			}
			if conds == nil {
				e.always, e.conds = true, nil
			} else if !e.always {
				e.conds = append(e.conds, conds)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var allowed []string
	groupOf := map[bpfc.Action]*bpfc.SyscallGroup{}
	var order []bpfc.Action
	for _, n := range names {
		e := byName[n]
		g := groupOf[e.action]
		if g == nil {
			g = &bpfc.SyscallGroup{Action: e.action}
			groupOf[e.action] = g
			order = append(order, e.action)
		}
		if e.always {
			g.Names = append(g.Names, n)
			if e.action == bpfc.ActionAllow {
				allowed = append(allowed, n)
			}
			continue
		}
		for _, c := range e.conds {
			g.NamesWithCondtions = append(g.NamesWithCondtions, bpfc.NameWithConditions{Name: n, Conditions: c})
		}
	}
	slices.Sort(order) // allow (0x7fff0000) last: the errno groups are few and short
	groups := make([]bpfc.SyscallGroup, 0, len(order))
	for _, act := range order {
		groups = append(groups, *groupOf[act])
	}
	return groups, allowed, nil
}

// applies says whether rule s is part of the profile for a sandbox with
// o's capabilities on goarch, as Docker decides it for a container.
func applies(s *moby.Syscall, goarch string, o options) bool {
	if in := s.Includes; in != nil {
		for _, c := range in.Caps {
			if !slices.Contains(o.caps, c) {
				return false
			}
		}
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, goarch) {
			return false
		}
		if in.MinKernel != nil && kernelBefore(o.kernel, in.MinKernel) {
			return false
		}
	}
	if ex := s.Excludes; ex != nil {
		for _, c := range ex.Caps {
			if slices.Contains(o.caps, c) {
				return false
			}
		}
		if slices.Contains(ex.Arches, goarch) {
			return false
		}
		if ex.MinKernel != nil && !kernelBefore(o.kernel, ex.MinKernel) {
			return false
		}
	}
	return true
}

// conditions translates a rule's argument comparisons (all must hold);
// nil when it has none.
func conditions(args []specs.LinuxSeccompArg) (bpfc.ArgumentConditions, error) {
	if len(args) == 0 {
		return nil, nil
	}
	var out bpfc.ArgumentConditions
	for _, a := range args {
		c := bpfc.Condition{Argument: uint32(a.Index), Value: a.Value}
		switch a.Op {
		case specs.OpEqualTo:
			c.Operation = bpfc.Equal
		case specs.OpNotEqual:
			c.Operation = bpfc.NotEqual
		case specs.OpLessThan:
			c.Operation = bpfc.LessThan
		case specs.OpLessEqual:
			c.Operation = bpfc.LessOrEqual
		case specs.OpGreaterThan:
			c.Operation = bpfc.GreaterThan
		case specs.OpGreaterEqual:
			c.Operation = bpfc.GreaterOrEqual
		case specs.OpMaskedEqual:
			// (arg & mask) == 0 is "none of mask's bits set"; another
			// masked value has no equivalent here.
			if a.ValueTwo != 0 {
				return nil, fmt.Errorf("argument %d: masked comparison with %#x is not translated", a.Index, a.ValueTwo)
			}
			c.Operation = bpfc.BitsNotSet
		default:
			return nil, fmt.Errorf("argument %d: comparison %s is not translated", a.Index, a.Op)
		}
		if a.Index > 5 {
			return nil, fmt.Errorf("argument %d: out of range", a.Index)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseRelease reads "6.18.44-fc-v1252" as kernel 6, major revision 18.
func parseRelease(release string) (*moby.KernelVersion, error) {
	f := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) < 2 {
		return nil, fmt.Errorf("%w: kernel release %q is not <kernel>.<major>[.<minor>]", ErrProfile, release)
	}
	k, err1 := strconv.ParseUint(f[0], 10, 32)
	m, err2 := strconv.ParseUint(f[1], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%w: kernel release %q: %w", ErrProfile, release, err)
	}
	return &moby.KernelVersion{Kernel: k, Major: m}, nil
}

func kernelBefore(have, want *moby.KernelVersion) bool {
	return have.Kernel < want.Kernel || (have.Kernel == want.Kernel && have.Major < want.Major)
}

func utsString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// Arch is the architecture the filter is for, as the kernel's audit names
// it ("x86_64", "aarch64").
func (f *Filter) Arch() string { return f.arch.Name }

// Len is the program's length in instructions.
func (f *Filter) Len() int { return len(f.raw) }

// Allowed lists, sorted, the calls the filter allows whatever their
// arguments. A call with argument rules (clone, socket, personality) is
// not among them: ask Check.
func (f *Filter) Allowed() []string { return slices.Clone(f.allowed) }

// Program is the filter as bubblewrap's --seccomp reads it and seccomp(2)
// loads it: an array of struct sock_filter in the host's byte order.
func (f *Filter) Program() []byte {
	b := make([]byte, 0, 8*len(f.raw))
	for _, r := range f.raw {
		b = binary.NativeEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.NativeEndian.AppendUint32(b, r.K)
	}
	return b
}

// Verdict is what the filter does with one call.
type Verdict struct {
	Allowed bool
	Errno   syscall.Errno // the error a refused call returns
}

func (v Verdict) String() string {
	if v.Allowed {
		return "allowed"
	}
	return "refused: " + v.Errno.Error()
}

// Check runs the compiled program, in a BPF interpreter, on a call of
// name with args (missing ones are 0) from the filter's architecture.
func (f *Filter) Check(name string, args ...uint64) (Verdict, error) {
	nr, ok := f.arch.SyscallNames[name]
	if !ok {
		return Verdict{}, fmt.Errorf("seccomp: %s has no system call %q", f.arch.Name, name)
	}
	return f.check(uint32(nr), uint32(f.arch.ID), args...)
}

// check evaluates struct seccomp_data{nr, arch, instruction_pointer, args[6]}.
func (f *Filter) check(nr, auditArch uint32, args ...uint64) (Verdict, error) {
	if len(args) > 6 {
		return Verdict{}, fmt.Errorf("seccomp: %d arguments: a system call has at most 6", len(args))
	}
	// The kernel's loads read seccomp_data's 32-bit words in host order,
	// x/net/bpf's in network order: each word is written so that the
	// interpreter's load at an offset sees what the kernel's would.
	data := make([]byte, 0, 64)
	data = binary.BigEndian.AppendUint32(data, nr)
	data = binary.BigEndian.AppendUint32(data, auditArch)
	data = binary.BigEndian.AppendUint64(data, 0)
	for i := range 6 {
		var v uint64
		if i < len(args) {
			v = args[i]
		}
		lo, hi := uint32(v), uint32(v>>32)
		if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 { // little-endian: the low word first
			data = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(data, lo), hi)
		} else {
			data = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(data, hi), lo)
		}
	}
	vm, err := bpf.NewVM(f.prog)
	if err != nil {
		return Verdict{}, fmt.Errorf("seccomp: %w", err)
	}
	ret, err := vm.Run(data)
	if err != nil {
		return Verdict{}, fmt.Errorf("seccomp: %w", err)
	}
	r := uint32(ret)
	if r&0xffff0000 == uint32(bpfc.ActionAllow) {
		return Verdict{Allowed: true}, nil
	}
	return Verdict{Errno: syscall.Errno(r & 0xffff)}, nil
}
