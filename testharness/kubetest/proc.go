package kubetest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// errPortTaken says a child could not bind the free port picked for it
// (someone else took it first): start it again on another.
var errPortTaken = errors.New("port taken")

// maxPortAttempts bounds the retries on errPortTaken.
const maxPortAttempts = 5

// proc is a child process with its output in a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logFile string
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
	once    sync.Once
}

// startProc starts bin with args, its stdout and stderr appended to logFile.
func startProc(name, bin, logFile string, args ...string) (*proc, error) {
	return startProcEnv(name, bin, logFile, nil, args...)
}

// startProcEnv is startProc with the environment env (nil: this process's).
func startProcEnv(name, bin, logFile string, env []string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &proc{name: name, logFile: logFile, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubetest: start %s: %w", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// exitError says why the process ended during its start.
func (p *proc) exitError() error {
	out := p.tail(4096)
	if strings.Contains(out, "address already in use") {
		return fmt.Errorf("kubetest: %s: %w", p.name, errPortTaken)
	}
	return fmt.Errorf("kubetest: %s exited during start: %v; log %s ends:\n%s", p.name, p.waitErr, p.logFile, out)
}

// tail is the last n bytes of the process's log.
func (p *proc) tail(n int64) string {
	f, err := os.Open(p.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// kill kills the process's group by its process id and waits for it.
func (p *proc) kill() {
	p.once.Do(func() { killGroup(p.cmd.Process.Pid) })
	<-p.exited
}

// freeAddr asks the kernel for a free port on 127.0.0.1. The port is released
// before it is returned, so another process may take it first.
func freeAddr() (string, error) { return freeAddrOn("127.0.0.1") }

// freeAddrOn is freeAddr on another address of this machine.
func freeAddrOn(ip string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", fmt.Errorf("kubetest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
