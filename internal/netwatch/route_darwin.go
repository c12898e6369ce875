package netwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// RouteSocket listens for interface, address and route changes on a BSD
// routing socket (macOS).
type RouteSocket struct{}

// New returns the platform's source.
func New() Source { return RouteSocket{} }

// Run implements Source.
func (RouteSocket) Run(ctx context.Context, changes chan<- struct{}) error {
	fd, err := unix.Socket(unix.AF_ROUTE, unix.SOCK_RAW, unix.AF_UNSPEC)
	if err != nil {
		return fmt.Errorf("netwatch: routing socket: %w", err)
	}
	defer unix.Close(fd)
	// A receive timeout lets the loop notice ctx.
	tv := unix.NsecToTimeval((500 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netwatch: routing socket timeout: %w", err)
	}
	buf := make([]byte, 16<<10)
	for ctx.Err() == nil {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			notify(changes)
			continue
		case err != nil:
			return fmt.Errorf("netwatch: routing socket read: %w", err)
		}
		if n > 0 {
			notify(changes)
		}
	}
	return nil
}
