//go:build !linux

package launch

import (
	"os"
	"syscall"
)

// sysProcAttr: only Linux can tie the child's life to the wrapper's.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// saveTerminal is a no-op here.
func saveTerminal(*os.File) func() { return func() {} }

// PortTaken cannot tell here; only a child that exits is retried.
func PortTaken(pid, port int) bool { return false }
