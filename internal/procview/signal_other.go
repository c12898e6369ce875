//go:build unix && !linux

package procview

import "syscall"

// signalVerified runs verify and sends sig to pid right after it: the
// window for a reused pid is the microseconds between the two calls.
func signalVerified(pid int, sig syscall.Signal, verify func() error) error {
	if err := verify(); err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}
