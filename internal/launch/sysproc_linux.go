package launch

import "syscall"

// sysProcAttr makes the kernel send the child SIGTERM if the wrapper dies,
// so a killed wrapper leaves no OpenCode behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
