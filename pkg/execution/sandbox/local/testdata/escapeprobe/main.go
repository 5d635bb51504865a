package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "keyring":
		err = keyring()
	case "userns":
		cmd := exec.Command("/proc/self/exe", "sleep", "0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		err = cmd.Run()
	case "ptrace":
		err = attach(pidArg())
	case "vmread":
		err = vmread(pidArg())
	case "ptrace-child":
		cmd := exec.Command("/proc/self/exe", "sleep", "30")
		if err = cmd.Start(); err == nil {
			err = attach(cmd.Process.Pid)
			_ = cmd.Process.Kill()
		}
	case "perf":
		// struct perf_event_attr: type PERF_TYPE_SOFTWARE (1), size 128,
		// config PERF_COUNT_SW_CPU_CLOCK (0), exclude_kernel and
		// exclude_hv (what perf_event_paranoid 2 lets anyone count); for
		// this process, any cpu.
		var attr [128]byte
		*(*uint32)(unsafe.Pointer(&attr[0])) = 1
		*(*uint32)(unsafe.Pointer(&attr[4])) = 128
		*(*uint64)(unsafe.Pointer(&attr[40])) = 1<<5 | 1<<6
		err = call(syscall.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), 0)
	case "bpf":
		// union bpf_attr for BPF_MAP_CREATE (0): BPF_MAP_TYPE_ARRAY (2),
		// key 4 bytes, value 4 bytes, 1 entry.
		attr := [5]uint32{2, 4, 4, 1, 0}
		nr := uintptr(321) // amd64
		if runtime.GOARCH == "arm64" {
			nr = 280
		}
		err = call(nr, 0, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr), 0, 0)
	case "sleep":
		d, _ := strconv.Atoi(os.Args[2])
		time.Sleep(time.Duration(d) * time.Second)
		return
	default:
		os.Exit(2)
	}
	if err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	fmt.Println("escaped")
}

func pidArg() int {
	if len(os.Args) < 3 {
		os.Exit(2)
	}
	pid, err := strconv.Atoi(os.Args[2])
	if err != nil {
		os.Exit(2)
	}
	return pid
}

func call(nr, a0, a1, a2, a3, a4 uintptr) error {
	r, _, errno := syscall.Syscall6(nr, a0, a1, a2, a3, a4, 0)
	if errno != 0 {
		return errno
	}
	if int(r) > 2 {
		syscall.Close(int(r))
	}
	return nil
}

func keyring() error {
	typ, _ := syscall.BytePtrFromString("user")
	desc, _ := syscall.BytePtrFromString("slipway-escape-probe")
	payload := []byte("x")
	const sessionKeyring = ^uintptr(2) // KEY_SPEC_SESSION_KEYRING, -3
	r, _, errno := syscall.Syscall6(syscall.SYS_ADD_KEY, uintptr(unsafe.Pointer(typ)), uintptr(unsafe.Pointer(desc)),
		uintptr(unsafe.Pointer(&payload[0])), uintptr(len(payload)), sessionKeyring, 0)
	if errno != 0 {
		return fmt.Errorf("add_key: %w", errno)
	}
	fmt.Println("add_key: key", r)
	// KEYCTL_GET_KEYRING_ID (0) of KEY_SPEC_USER_KEYRING (-4): the keyring
	// every process of this uid on the host shares.
	id, _, errno := syscall.Syscall(syscall.SYS_KEYCTL, 0, ^uintptr(3), 0)
	if errno != 0 {
		return fmt.Errorf("keyctl: %w", errno)
	}
	fmt.Println("keyctl: user keyring", id)
	return nil
}

func attach(pid int) error {
	if err := syscall.PtraceAttach(pid); err != nil {
		return fmt.Errorf("ptrace attach %d: %w", pid, err)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WALL, nil)
	_ = syscall.PtraceDetach(pid)
	return nil
}

func vmread(pid int) error {
	buf := make([]byte, 4)
	local := syscall.Iovec{Base: &buf[0], Len: 4}
	remote := struct {
		base uintptr
		len  uint64
	}{0x400000, 4}
	nr := uintptr(310) // process_vm_readv on amd64
	if runtime.GOARCH == "arm64" {
		nr = 270
	}
	_, _, errno := syscall.Syscall6(nr, uintptr(pid), uintptr(unsafe.Pointer(&local)), 1,
		uintptr(unsafe.Pointer(&remote)), 1, 0)
	if errno != 0 {
		return fmt.Errorf("process_vm_readv %d: %w", pid, errno)
	}
	fmt.Printf("process_vm_readv: %q\n", buf)
	return nil
}
