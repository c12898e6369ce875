//go:build !linux

package procview

import (
	"errors"
	"net/netip"
)

// ListenerPID is not available here: finding a socket's owner needs
// /proc (on macOS, without cgo, there is no way to read another process's
// file descriptors). `watch` then knows OpenCode's process only from an
// OpenCode 2 pid.
func ListenerPID(port, uid int) (int, error) {
	return 0, errors.ErrUnsupported
}

// ListenAddrs is not available here either, for the same reason.
func ListenAddrs(pid int) ([]netip.AddrPort, error) {
	return nil, errors.ErrUnsupported
}
