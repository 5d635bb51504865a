package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// outputGrace bounds how long an exec waits, after its command exited, for
// the output pipes to close: a background process the command left behind
// may hold them open, and keeps running.
const outputGrace = 2 * time.Second

// Cancellation causes.
var (
	errTimeout   = errors.New("runner: exec timeout")
	errCancelled = errors.New("runner: exec cancelled")
)

// exec runs one command and streams its output as frames on fw. r is the
// rest of the connection: an OpCancel line, the connection's end or a read
// error cancels the command.
func (s *server) exec(ctx context.Context, r *bufio.Reader, fw *frameWriter, req *ExecRequest) {
	timing := &ExecTiming{Received: time.Now().UTC()}
	received := timing.Received
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		fw.fail(ErrCodeBadRequest, "exec: argv is empty")
		return
	}
	if req.TimeoutMs < 0 || req.MaxOutput < 0 || req.MaxOutput > MaxOutputLimit {
		fw.fail(ErrCodeBadRequest, "exec: timeoutMs %d or maxOutput %d out of range (maxOutput at most %d)", req.TimeoutMs, req.MaxOutput, MaxOutputLimit)
		return
	}
	if req.GraceMs < 0 || req.GraceMs > MaxGraceMs {
		fw.fail(ErrCodeBadRequest, "exec: graceMs %d out of range (0 to %d)", req.GraceMs, MaxGraceMs)
		return
	}
	grace := time.Duration(req.GraceMs) * time.Millisecond
	if grace == 0 {
		grace = DefaultGraceMs * time.Millisecond
	}
	max := req.MaxOutput
	if max == 0 {
		max = DefaultMaxOutput
	}
	if req.TraceParent != "" && !ValidTraceParent(req.TraceParent) {
		fw.fail(ErrCodeBadRequest, "exec: traceparent %q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", req.TraceParent)
		return
	}
	env := mergeEnv(s.cfg.Env, req.Env)
	if req.TraceParent != "" {
		env = mergeEnv(env, map[string]string{EnvTraceParent: req.TraceParent})
	}
	dir := req.Dir
	if dir == "" {
		dir = s.cfg.Workdir
	}
	path, err := lookPath(req.Argv[0], envValue(env, "PATH"), dir)
	if err != nil {
		fw.fail(ErrCodeStart, "%v", err)
		return
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if req.TimeoutMs > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, time.Duration(req.TimeoutMs)*time.Millisecond, errTimeout)
		defer stop()
	}
	go watchConn(r, cancel)

	out := &outputLimiter{fw: fw, max: max, cancel: cancel}
	cmd := exec.Command(path, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0]
	if s.cfg.Launcher != "" {
		cmd = exec.Command(s.cfg.Launcher, append([]string{LauncherArg, req.Argv[0], path}, req.Argv[1:]...)...)
	}
	cmd.Env = env
	cmd.Dir = dir
	if len(req.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	// The runner's own pipes, read under one lock, so that an event is
	// framed after every byte the command wrote before it (see drain).
	pipes, err := newOutputPipes(out)
	if err != nil {
		fw.fail(ErrCodeInternal, "output pipes: %v", err)
		return
	}
	defer pipes.close()
	cmd.Stdout, cmd.Stderr = pipes.w[0], pipes.w[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Once the command has exited, Wait gives the output pipes this long to
	// close.
	cmd.WaitDelay = outputGrace

	// Counted before it starts: once started, the command may act (and be
	// seen acting) before this goroutine runs again, and a ping meanwhile
	// must not say nothing runs.
	s.mu.Lock()
	s.running++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		s.running--
		s.mu.Unlock()
	}
	// Before the command starts: its first event may come at once, and
	// the payload is in the runner's hands already.
	var evs *execEvents
	if req.Events {
		fw.write(&Frame{Type: FrameEvent, Event: &Event{Kind: EventPayloadFetched, At: received.UTC()}})
		evs = &execEvents{fw: fw, flush: pipes.drain}
		s.events.add(evs)
	}
	start := time.Now()
	timing.Started = start.UTC()
	err = cmd.Start()
	pipes.started()
	if err != nil {
		if evs != nil {
			s.events.remove(evs)
		}
		pipes.wait(outputGrace) // nothing else holds them: at once
		done()
		fw.fail(ErrCodeStart, "start %s: %v", req.Argv[0], err)
		return
	}
	stop := stopOnDone(ctx, cmd.Process.Pid, grace)
	werr := cmd.Wait()
	// the output pipes may be held open by what the command left behind:
	// they get outputGrace to close
	pipes.wait(outputGrace)
	done()
	var rejected map[string]int
	if evs != nil {
		rejected = s.events.remove(evs)
	}

	timing.Exited = time.Now().UTC()
	st := &ExitStatus{ExitCode: -1, DurationMs: timing.Exited.Sub(start).Milliseconds(), Timing: timing}
	if ps := cmd.ProcessState; ps != nil {
		st.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = ws.Signal().String()
		}
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		st.TimedOut = true
	case errors.Is(cause, errCancelled), ctx.Err() != nil:
		st.Cancelled = true
	}
	st.Stop = stop
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) && ctx.Err() == nil {
		fw.fail(ErrCodeInternal, "wait for %s: %v", req.Argv[0], werr)
		return
	}
	st.Truncated, st.OutputBytes = out.result()
	st.EventsRejected = rejected
	fw.write(&Frame{Type: FrameExit, Exit: st})
}

// stopOnDone stops the process group pid (the command and what it
// started) when ctx ends before the command exits: SIGTERM, then SIGKILL
// once grace has passed without the command exiting. It waits for the
// command (the group's leader) to exit, without reaping it, and returns
// the stop's outcome: "" when no stop was needed, StopTerminated when the
// command exited within the grace, StopKilled when it needed SIGKILL. The
// caller reaps the command (cmd.Wait) after it returned.
//
// Whatever the outcome, a stop ends with SIGKILL to the group, so that
// nothing it started outlives a stopped command. That signal goes out
// while the leader is an unreaped zombie, which keeps the group's id from
// being reused.
func stopOnDone(ctx context.Context, pid int, grace time.Duration) string {
	exited := make(chan struct{})
	done := make(chan string, 1)
	go func() {
		select {
		case <-exited:
			done <- ""
			return
		case <-ctx.Done():
		}
		stop := StopTerminated
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			stop = StopKilled
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		done <- stop
	}()
	waitExited(pid)
	close(exited)
	return <-done
}

// waitExited returns once process pid, a child, has exited, leaving it
// for Wait to reap.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// watchConn cancels the exec when the client sends OpCancel or the
// connection ends; other lines are ignored.
func watchConn(r *bufio.Reader, cancel context.CancelCauseFunc) {
	defer cancel(errCancelled)
	for {
		line, err := readLine(r, MaxRequestBytes)
		if err != nil {
			return
		}
		var req Request
		if json.Unmarshal(line, &req) == nil && req.Op == OpCancel {
			return
		}
	}
}

// outputLimiter streams the first max bytes of stdout and stderr together
// as output frames and counts, then drops, the rest.
type outputLimiter struct {
	fw     *frameWriter
	max    int64
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	total int64
}

func (o *outputLimiter) stream(name string) *streamWriter { return &streamWriter{o: o, name: name} }

func (o *outputLimiter) result() (truncated bool, total int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total > o.max, o.total
}

type streamWriter struct {
	o    *outputLimiter
	name string
}

// Write never fails: a command whose client went away is cancelled, not
// made to die of a broken pipe.
func (w *streamWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	room := max(o.max-o.total, 0)
	o.total += int64(len(p))
	send := p[:min(int64(len(p)), room)]
	o.mu.Unlock()
	for len(send) > 0 {
		n := min(len(send), ChunkBytes)
		if !o.fw.write(&Frame{Type: FrameOutput, Stream: w.name, Data: send[:n]}) {
			o.cancel(errCancelled)
			break
		}
		send = send[n:]
	}
	return len(p), nil
}

// mergeEnv sets add over base, keeping base's order, then add's new names
// sorted.
func mergeEnv(base []string, add map[string]string) []string {
	out := make([]string, 0, len(base)+len(add))
	seen := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if seen[k] {
			continue
		}
		seen[k] = true
		if v, ok := add[k]; ok {
			kv = k + "=" + v
		}
		out = append(out, kv)
	}
	var names []string
	for k := range add {
		if !seen[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		out = append(out, k+"="+add[k])
	}
	return out
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// lookPath finds file in path (the command's PATH, not the runner's). A
// name with a slash is used as is, relative to dir.
func lookPath(file, path, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %q", file, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
