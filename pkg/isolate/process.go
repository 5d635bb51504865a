package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/slipway-dev/slipway/pkg/isolate/seccomp"
)

const (
	// waitDelay bounds how long Wait waits for the output pipes to close
	// after bwrap has exited (exec.Cmd.WaitDelay).
	waitDelay = 5 * time.Second
	// goneLimit bounds how long Wait waits for the sandbox's pid 1 to be gone
	// after bwrap has exited and it was sent SIGKILL.
	goneLimit = 10 * time.Second
)

// errTimedOut is the cancellation cause of Spec.Timeout.
var errTimedOut = errors.New("isolate: timeout")

// Result says what happened to a command.
type Result struct {
	// ExitCode is the command's exit status as bwrap reports it: 128+n when
	// signal n killed the command (as a shell reports it), -1 when the
	// sandbox itself was killed from outside (see Signal). bwrap's own
	// failures once the sandbox exists (a command not found, a mount point
	// missing from a read-only Root) are exit code 1 with a "bwrap: " line
	// in the output.
	ExitCode int
	// Signal names the signal that killed the sandbox from outside ("killed"
	// after Timeout, a cancelled context or Kill); empty otherwise.
	Signal string
	// TimedOut is true when Spec.Timeout fired and killed the sandbox.
	TimedOut bool
	// Output is the tail of combined stdout and stderr (Run only), at most
	// Spec.MaxOutput bytes; Truncated says earlier bytes were dropped.
	Output    []byte
	Truncated bool
	// Duration is the wall-clock time from start to the end of Wait.
	Duration time.Duration
	// Command is the host command line that ran, environment values
	// redacted: for logs and debugging.
	Command []string
}

// Process is a started sandbox. Its methods are safe for concurrent use.
type Process struct {
	cmd     *exec.Cmd
	command []string // redacted
	started time.Time
	cancel  context.CancelFunc

	// bornIn is set by run before it reports the start: bwrap was forked
	// inside Spec.Cgroup (see Cgroup.enter), and Start need not move it.
	bornIn bool

	mu      sync.Mutex
	sandbox procRef // the sandbox's pid 1, as seen from the host
	killed  bool    // Kill, Timeout or the context asked for SIGKILL

	done chan struct{}
	res  *Result
	err  error
}

// Run runs s to completion and returns its Result, with the last
// Spec.MaxOutput bytes of combined stdout and stderr in Output. A non-zero
// exit and a Timeout are Results, not errors. Errors are for a bad Spec
// (ErrInvalidSpec), a host that cannot sandbox (ErrUnavailable), failing to
// start, and ctx ending first: then Run returns the Result so far together
// with an error wrapping the context's cause. When Run returns, no process
// of the sandbox is left.
func Run(ctx context.Context, s Spec) (*Result, error) {
	out := newTailBuffer(s.withDefaults().MaxOutput)
	p, err := Start(ctx, s, out, out)
	if err != nil {
		return nil, err
	}
	res, err := p.Wait()
	res.Output, res.Truncated = out.Bytes()
	return res, err
}

// Start starts s and returns without waiting for it, for long-lived
// sandboxes. ctx bounds the sandbox's whole life, as with
// exec.CommandContext: when it ends, or Spec.Timeout passes, the sandbox is
// killed. stdout and stderr receive the command's output; nil discards it,
// and one writer for both keeps the order of the two. Spec.MaxOutput does
// not apply. Call Wait to release resources. Each running Process holds
// one OS thread (see run).
func Start(ctx context.Context, s Spec, stdout, stderr io.Writer) (*Process, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	prlimit := "" // empty: Limits are set with prlimit(2) (rlimit.go)
	if s.Limits != (Limits{}) && limitsByExec(bwrap) {
		if prlimit, err = exec.LookPath("prlimit"); err != nil {
			return nil, fmt.Errorf("%w: limits with a setuid bwrap need prlimit (util-linux): %w", ErrUnavailable, err)
		}
	}
	if limitsByExec(bwrap) {
		// A setuid bwrap refuses --disable-userns: the filter alone
		// refuses user namespaces there.
		s.noDisableUsernsOnly = true
	}
	c := buildCommand(&s, bwrap, prlimit)
	p := &Process{command: c.redacted(), done: make(chan struct{})}
	var filter *os.File // read end of a pipe holding the whole program
	if withSeccomp(&s) {
		if filter, err = seccompPipe(s.Caps); err != nil {
			return nil, err
		}
		defer filter.Close() // bwrap has its own copy once started
	}

	var cctx context.Context
	if s.Timeout > 0 {
		cctx, p.cancel = context.WithTimeoutCause(ctx, s.Timeout, errTimedOut)
	} else {
		cctx, p.cancel = context.WithCancel(ctx)
	}
	argsR, argsW, err := os.Pipe()
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("isolate: %w", err)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		p.cancel()
		closeAll(argsR, argsW)
		return nil, fmt.Errorf("isolate: %w", err)
	}
	cmd := exec.CommandContext(cctx, c.argv[0], c.argv[1:]...)
	cmd.Env = []string{} // prlimit and bwrap get none; the sandbox's comes through --args
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, stdout, stderr
	cmd.ExtraFiles = []*os.File{argsR, infoW} // argsFD, infoFD
	if filter != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, filter) // seccompFD
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u := s.HostUser; u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
	}
	cmd.Cancel = p.kill
	cmd.WaitDelay = waitDelay
	p.cmd = cmd

	started, infoDone := make(chan error, 1), make(chan struct{})
	go p.run(cctx, s.Cgroup, started, infoDone)
	err = <-started
	closeAll(argsR, infoW)
	if err == nil {
		// bwrap (or prlimit, which execs it) waits for its options on
		// argsFD before it forks anything: joined and limited now, the
		// whole sandbox is in the cgroup and under the limits.
		var serr error
		if s.Cgroup != nil && !p.bornIn {
			serr = s.Cgroup.join(p.cmd.Process.Pid)
		}
		if serr == nil && s.Limits != (Limits{}) && prlimit == "" {
			serr = setLimits(p.cmd.Process.Pid, s.Limits)
		}
		if serr != nil {
			_ = p.kill()
			closeAll(argsW, infoR)
			close(infoDone)
			<-p.done
			return nil, fmt.Errorf("isolate: start %s: %w", shellJoin(p.command), serr)
		}
	}
	if err != nil {
		closeAll(argsW, infoR)
		p.cancel()
		return nil, fmt.Errorf("isolate: start %s: %w", shellJoin(p.command), err)
	}
	go func() {
		// An error here means bwrap died before reading; Wait reports why.
		_, _ = argsW.Write(c.argsData())
		_ = argsW.Close()
	}()
	p.readInfo(infoR)
	_ = infoR.Close()
	close(infoDone)
	return p, nil
}

// run starts and waits for bwrap on one locked OS thread. bwrap's
// --die-with-parent (PR_SET_PDEATHSIG) fires when the thread that forked it
// exits, not the process; Go may end a thread while the process lives on,
// so the thread is kept until bwrap has exited. With cg, the thread forks
// bwrap inside cg where it can (see Cgroup.enter).
func (p *Process) run(ctx context.Context, cg *Cgroup, started chan<- error, infoDone <-chan struct{}) {
	runtime.LockOSThread()
	stuck := false
	defer func() {
		if !stuck { // a thread left in a sandbox's cgroup ends with this goroutine
			runtime.UnlockOSThread()
		}
	}()
	p.started = time.Now()
	var in bool
	if cg != nil {
		in, stuck = cg.enter()
	}
	err := p.cmd.Start()
	if in {
		stuck = cg.leave() != nil
		p.bornIn = err == nil
	}
	if err != nil {
		started <- err
		return
	}
	started <- nil
	werr := p.cmd.Wait()
	<-infoDone
	p.finish(ctx, werr)
}

// readInfo learns the host pid of the sandbox's pid 1 from bwrap's
// --info-fd. If bwrap dies first there is nothing to read and no sandbox.
func (p *Process) readInfo(r io.Reader) {
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil || info.ChildPid <= 0 {
		return
	}
	ref, ok := refOf(info.ChildPid)
	if !ok {
		return
	}
	p.mu.Lock()
	p.sandbox = ref
	killed := p.killed
	p.mu.Unlock()
	if killed { // a kill raced with start and could not name the sandbox yet
		_ = ref.signal(syscall.SIGKILL, false)
	}
}

// finish makes sure nothing of the sandbox is left, then records the Result.
func (p *Process) finish(ctx context.Context, werr error) {
	defer close(p.done)
	defer p.cancel()
	p.mu.Lock()
	sb := p.sandbox
	p.mu.Unlock()
	// bwrap has exited; --die-with-parent kills its sandbox, but
	// asynchronously. Killing the sandbox's pid 1 makes the kernel kill and
	// reap every process in its pid namespace before pid 1 is gone.
	errs := []error{sb.signal(syscall.SIGKILL, false), sb.waitGone(goneLimit)}

	res := &Result{ExitCode: -1, Command: p.command, Duration: time.Since(p.started)}
	var exitErr *exec.ExitError
	switch {
	case werr == nil, errors.As(werr, &exitErr):
	case ctx.Err() != nil && errors.Is(werr, ctx.Err()):
	default:
		errs = append(errs, fmt.Errorf("isolate: wait for %s: %w", p.command[0], werr))
	}
	if st := p.cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
			if cause := context.Cause(ctx); errors.Is(cause, errTimedOut) {
				res.TimedOut = true
			} else if cause != nil {
				errs = append(errs, fmt.Errorf("isolate: sandbox killed: %w", cause))
			}
		}
	}
	p.res, p.err = res, errors.Join(errs...)
}

// kill sends SIGKILL to bwrap's process group (bwrap, and the sandbox while
// it is being set up) and to the sandbox's pid 1, which takes the whole pid
// namespace with it. It is exec.Cmd.Cancel.
func (p *Process) kill() error {
	p.mu.Lock()
	p.killed = true
	sb := p.sandbox
	p.mu.Unlock()
	var errs []error
	if err := p.cmd.Process.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
		// Not reaped yet, so its pid still names the group.
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("isolate: kill process group %d: %w", p.cmd.Process.Pid, err))
		}
	}
	errs = append(errs, sb.signal(syscall.SIGKILL, false))
	return errors.Join(errs...)
}

// Wait waits for the sandbox to end and returns its Result (Output is
// empty: the output went to Start's writers). Errors are as for Run. When
// Wait returns, no process of the sandbox is left. Wait may be called more
// than once and from several goroutines.
func (p *Process) Wait() (*Result, error) {
	<-p.done
	res := *p.res
	res.Command = slices.Clone(res.Command)
	return &res, p.err
}

// Done is closed when the sandbox has ended and Wait will not block.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill kills the sandbox and everything in it with SIGKILL; Wait then
// reports Signal "killed". Killing an ended sandbox does nothing.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.kill()
}

// Signal sends sig to the sandbox's process group: the command and every
// descendant that did not move to a group of its own (bwrap's pid 1 is in
// it too, and ignores all but SIGKILL and SIGSTOP from outside). SIGTERM
// asks the command to stop; SIGSTOP and SIGCONT freeze and thaw it.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	sb := p.sandbox
	p.mu.Unlock()
	if !sb.alive() {
		return fmt.Errorf("isolate: signal %s: sandbox is not running", sig)
	}
	return sb.signal(sig, true)
}

// Pid is the host pid of bwrap (prlimit execs it), the leader of its own
// process group.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pgid is the host process group of bwrap; it equals Pid. The sandbox
// itself runs in a new session (bwrap --new-session): see SandboxPid.
func (p *Process) Pgid() int { return p.cmd.Process.Pid }

// SandboxPid is the host pid of the sandbox's pid 1 (bwrap's init; the
// command is its child), which also leads the sandbox's session and process
// group. It is 0 if bwrap failed before creating the sandbox.
func (p *Process) SandboxPid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sandbox.pid
}

// Command is the host command line, environment values redacted.
func (p *Process) Command() []string { return slices.Clone(p.command) }

// Available reports whether sandboxes can run here: bwrap is on PATH and can
// create the namespaces Run uses, and prlimit (for Limits) is on PATH where
// Start needs it (a setuid bwrap and a caller that is not root). The error
// wraps ErrUnavailable and carries bwrap's message.
func Available(ctx context.Context) error {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	args := []string{"--ro-bind", "/", "/",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"}
	if !limitsByExec(bwrap) { // as Start: a setuid bwrap has no --disable-userns
		args = append(args, "--unshare-user", "--disable-userns")
	}
	args = append(args, "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev", "--cap-drop", "ALL", "true")
	cmd := exec.CommandContext(ctx, bwrap, args...)
	cmd.Env = []string{}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s: %w: %s", ErrUnavailable, bwrap, err, bytes.TrimSpace(out))
	}
	if _, err := exec.LookPath("prlimit"); err != nil && limitsByExec(bwrap) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// seccompPipe compiles the filter for a sandbox keeping caps and returns
// a pipe that holds its program, written and closed: bwrap reads it to the
// end. The program (at most a few thousand 8-byte instructions) fits in a
// pipe's buffer.
func seccompPipe(caps []string) (*os.File, error) {
	f, err := seccomp.Compile(seccomp.WithCaps(caps...))
	if err != nil {
		return nil, fmt.Errorf("isolate: seccomp filter: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("isolate: %w", err)
	}
	_, err = w.Write(f.Program())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("isolate: seccomp filter: %w", err)
	}
	return r, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
