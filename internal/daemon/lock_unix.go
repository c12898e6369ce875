//go:build unix

package daemon

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/mcp-reconnect/mcp-reconnect/internal/registry"
)

// lockRegistry takes an exclusive lock on the registry directory's lock
// file, released by unlock (or when the process dies).
func lockRegistry(reg *registry.Registry) (unlock func(), err error) {
	if err := os.MkdirAll(reg.Dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(reg.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
