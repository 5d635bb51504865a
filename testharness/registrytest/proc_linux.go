package registrytest

import "syscall"

// sysProcAttr puts the registry in its own process group, so that Close can
// kill it with anything it spawned, and asks the kernel to kill it if the test
// binary dies first (a timed-out `go test` must not leave registries behind).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
