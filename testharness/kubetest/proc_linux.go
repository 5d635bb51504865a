package kubetest

import "syscall"

// sysProcAttr puts a child in its own process group and asks the kernel to
// kill it if the test binary dies first (a timed-out `go test` must not
// leave an API server behind).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
