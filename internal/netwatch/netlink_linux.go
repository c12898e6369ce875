package netwatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink listens for link, address and route changes on a netlink route
// socket (Linux).
type Netlink struct{}

// New returns the platform's source.
func New() Source { return Netlink{} }

// Run implements Source.
func (Netlink) Run(ctx context.Context, changes chan<- struct{}) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netwatch: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		return fmt.Errorf("netwatch: netlink bind: %w", err)
	}
	// A receive timeout lets the loop notice ctx: closing a socket does
	// not wake a blocked recvfrom on Linux.
	tv := unix.NsecToTimeval((500 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netwatch: netlink timeout: %w", err)
	}
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			notify(changes) // we lost messages: something changed
			continue
		case err != nil:
			return fmt.Errorf("netwatch: netlink receive: %w", err)
		}
		if n > 0 {
			notify(changes)
		}
	}
	return nil
}
