//go:build !linux

package registrytest

import (
	"os"
	"syscall"
)

// sysProcAttr returns no attributes: only Linux gets a process group and a
// parent-death signal.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process pid.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
