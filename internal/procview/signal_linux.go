//go:build linux

package procview

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalVerified opens a pidfd for pid, runs verify, and signals through
// the pidfd: the pidfd pins the process that verify looked at, so a pid
// reused between the check and the signal is never hit. Kernels older
// than 5.3 have no pidfd: kill(2) right after verify.
func signalVerified(pid int, sig syscall.Signal, verify func() error) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		if err := verify(); err != nil {
			return err
		}
		return unix.Kill(pid, sig)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := verify(); err != nil {
		return err
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}
