//go:build !unix

package procview

import (
	"errors"
	"syscall"
)

func signalVerified(int, syscall.Signal, func() error) error {
	return errors.New("procview: cannot signal processes on this system")
}
