package netwatch

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink watches a netlink route socket (Linux). It keeps the State from
// a dump and the link, address and route messages after it, and reports a
// change only when the State differs: a veth without a global address, a
// Wi-Fi statistics update or an IPv6 address refresh changes nothing.
type Netlink struct{}

// New returns the platform's source.
func New() Source { return Netlink{} }

// Run implements Source.
func (Netlink) Run(ctx context.Context, changes chan<- struct{}) error {
	c, err := listen()
	if err != nil {
		return err
	}
	defer c.close()
	return c.run(ctx, func(State) { notify(changes) })
}

// conn is a netlink route socket subscribed to link, address and route
// changes. Its descriptor is non-blocking and sits in Go's netpoller, so
// a read waits without waking the process, and ctx ends it at once.
type conn struct {
	f   *os.File
	raw syscall.RawConn
	pid uint32 // the socket's port id: dump replies are addressed to it
	seq uint32
	buf []byte
}

// listen opens the socket in the calling thread's network namespace.
func listen() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netwatch: netlink socket: %w", err)
	}
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netwatch: netlink bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netwatch: netlink socket: %w", err)
	}
	nl, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		unix.Close(fd)
		return nil, fmt.Errorf("netwatch: netlink socket: bound to %T", sa)
	}
	f := os.NewFile(uintptr(fd), "netlink-route")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netwatch: netlink socket: %w", err)
	}
	return &conn{f: f, raw: raw, pid: nl.Pid, buf: make([]byte, 64<<10)}, nil
}

func (c *conn) close() { c.f.Close() }

// run reports each State that differs from the one before it, until ctx
// ends.
func (c *conn) run(ctx context.Context, changed func(State)) error {
	// A deadline in the past wakes a read parked in the netpoller.
	stop := context.AfterFunc(ctx, func() { _ = c.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	t, err := c.dump()
	if err != nil {
		return c.quiet(ctx, err)
	}
	last := t.state()
	for {
		msgs, err := c.read()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, unix.ENOBUFS) || errors.Is(err, errTruncated):
			// The kernel dropped messages: the tracker may be wrong.
			t = nil
		case err != nil:
			return fmt.Errorf("netwatch: netlink receive: %w", err)
		}
		if t != nil {
			for _, m := range msgs {
				t.apply(m)
			}
			if t.state().Equal(last) {
				continue // the kernel's chatter: statistics, lifetimes, veths
			}
		}
		// Something that matters may have changed: read everything
		// again and decide on that. The kernel removes some routes
		// without a message (the IPv4 routes of an interface that loses
		// its last address), and messages still queued may be older
		// than the truth; a dump is the truth now.
		if t, err = c.dump(); err != nil {
			return c.quiet(ctx, err)
		}
		if now := t.state(); !now.Equal(last) {
			last = now
			changed(now)
		}
	}
}

// quiet drops an error caused by ctx ending.
func (c *conn) quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

var errTruncated = errors.New("netlink message truncated")

// read waits in the netpoller for the next datagram and parses it.
// Messages from anyone but the kernel are dropped.
func (c *conn) read() ([]syscall.NetlinkMessage, error) {
	var n int
	var from unix.Sockaddr
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		n, from, rerr = unix.Recvfrom(int(fd), c.buf, unix.MSG_TRUNC)
		return rerr != unix.EAGAIN
	})
	if err = cmp.Or(err, rerr); err != nil {
		return nil, err
	}
	if n > len(c.buf) {
		return nil, errTruncated
	}
	if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseNetlinkMessage(c.buf[:n])
	if err != nil {
		return nil, nil // not from a kernel we understand: nothing to apply
	}
	return msgs, nil
}

// dump reads links, addresses and routes into a new tracker. Messages
// multicast meanwhile are applied too, in order: the tracker converges.
func (c *conn) dump() (*tracker, error) {
	const tries = 5
	for try := 1; ; try++ {
		t := newTracker()
		interrupted := false
		for _, typ := range []uint16{unix.RTM_GETLINK, unix.RTM_GETADDR, unix.RTM_GETROUTE} {
			intr, err := c.dumpOne(t, typ)
			if err != nil {
				return nil, err
			}
			interrupted = interrupted || intr
		}
		// A dump the kernel marks interrupted may have skipped entries.
		if !interrupted || try == tries {
			return t, nil
		}
	}
}

func (c *conn) dumpOne(t *tracker, typ uint16) (interrupted bool, err error) {
	c.seq++
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofRtGenmsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], c.seq)
	req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	var werr error
	err = c.raw.Write(func(fd uintptr) bool {
		werr = unix.Sendto(int(fd), req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return werr != unix.EAGAIN
	})
	if err = cmp.Or(err, werr); err != nil {
		return false, fmt.Errorf("netwatch: netlink dump: %w", err)
	}
	for {
		msgs, err := c.read()
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, errTruncated) {
			// Multicast messages were lost, maybe about what an
			// earlier part of the dump read: dump again.
			interrupted = true
			continue
		}
		if err != nil {
			return false, fmt.Errorf("netwatch: netlink dump: %w", err)
		}
		for _, m := range msgs {
			ours := m.Header.Seq == c.seq && m.Header.Pid == c.pid
			if ours && m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch {
			case ours && m.Header.Type == unix.NLMSG_DONE:
				return interrupted, nil
			case ours && m.Header.Type == unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return false, fmt.Errorf("netwatch: netlink dump: %w", syscall.Errno(-errno))
					}
				}
				return interrupted, nil
			}
			t.apply(m)
		}
	}
}
