//go:build !linux

package launch

import "syscall"

// sysProcAttr: only Linux can tie the child's life to the wrapper's.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// PortTaken cannot tell here; only a child that exits is retried.
func PortTaken(pid, port int) bool { return false }
