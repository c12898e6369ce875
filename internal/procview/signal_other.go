//go:build !linux

package procview

import "syscall"

// signalVerified never signals here: without the process view nothing
// can verify what a pid is now.
func signalVerified(int, syscall.Signal, func() error) error { return Unavailable }
