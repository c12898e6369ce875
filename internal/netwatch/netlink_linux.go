package netwatch

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink watches a netlink route socket (Linux): any link, address or
// route message makes it read the State again, and only a State that
// differs is a change, so a veth without a global address, a Wi-Fi
// statistics update or an IPv6 address refresh changes nothing.
type Netlink struct{}

// New returns the platform's source.
func New() Source { return Netlink{} }

// Run implements Source, in the calling thread's network namespace.
func (Netlink) Run(ctx context.Context, changed func(uplink bool)) error {
	f, err := listen()
	if err != nil {
		return err
	}
	defer f.Close()
	return watchSocket(ctx, f, linuxState, func(was, is State) { changed(Uplink(was, is)) })
}

// listen opens a netlink route socket subscribed to link, address and
// route changes, in the calling thread's network namespace.
func listen() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netwatch: netlink socket: %w", err)
	}
	groups := uint32(unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netwatch: netlink bind: %w", err)
	}
	return os.NewFile(uintptr(fd), "netlink-route"), nil
}

// watchSocket waits for the messages of the netlink socket f and calls
// changed with each State that differs from the one before it (was), until
// ctx ends. A message only says "look again": read is the truth, since the
// kernel changes some things without a message (it drops the IPv4 routes
// of an interface that loses its last address), and every message queued
// when a look starts is taken first, so a burst is one look. Any message
// may matter: one from someone other than the kernel costs a look that
// finds no difference.
//
// f is non-blocking, so it sits in Go's netpoller: a wait does not wake
// the process, and ctx ends it at once.
func watchSocket(ctx context.Context, f *os.File, read func() (State, error), changed func(was, is State)) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("netwatch: %w", err)
	}
	// A deadline in the past wakes a read parked in the netpoller.
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	last, err := read()
	if err != nil {
		return err
	}
	buf := make([]byte, 16<<10)
	for {
		var look bool
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			for {
				_, err := unix.Read(int(fd), buf)
				switch {
				case err == unix.EAGAIN:
					return look // nothing (more) queued: look, or wait
				case err == unix.ENOBUFS:
					look = true // messages were lost: look anyway
				case err != nil:
					rerr = err
					return true
				default:
					look = true
				}
			}
		})
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil || rerr != nil:
			return fmt.Errorf("netwatch: read %s: %w", f.Name(), cmp.Or(err, rerr))
		}
		now, err := read()
		if err != nil {
			continue // a failed look is no news; the next message retries
		}
		if !now.Equal(last) {
			was := last
			last = now
			changed(was, now)
		}
	}
}

// linuxState reads the State in three netlink dumps: the links (through
// net.Interfaces), every address, every route. One address dump, not one
// per interface, keeps a look cheap on a host with many container veths.
func linuxState() (State, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return State{}, fmt.Errorf("netwatch: list interfaces: %w", err)
	}
	up := map[uint32]string{} // the interfaces that count, by index
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagLoopback == 0 {
			up[uint32(ifc.Index)] = ifc.Name
		}
	}
	addrs, err := dump(unix.RTM_GETADDR, unix.RTM_NEWADDR, unix.SizeofIfAddrmsg)
	if err != nil {
		return State{}, err
	}
	s := State{Interfaces: map[string][]netip.Prefix{}}
	for _, m := range addrs {
		// struct ifaddrmsg: family, prefixlen, flags, scope u8, index u32.
		name, ok := up[binary.NativeEndian.Uint32(m.Data[4:])]
		a := attrs(m)
		// IFA_LOCAL is the machine's own address; IFA_ADDRESS is the
		// peer's on a point-to-point link, and the only one for IPv6.
		ip, _ := netip.AddrFromSlice(a[unix.IFA_LOCAL])
		if !ip.IsValid() {
			ip, _ = netip.AddrFromSlice(a[unix.IFA_ADDRESS])
		}
		flags := u32(a[unix.IFA_FLAGS], uint32(m.Data[2]))
		// A temporary (privacy) IPv6 address is replaced every day on a
		// laptop; its prefix is carried by the stable address beside it.
		// An address that failed duplicate detection is not usable.
		if !ok || !counts(ip) || int(m.Data[1]) > ip.BitLen() || flags&(unix.IFA_F_TEMPORARY|unix.IFA_F_DADFAILED) != 0 {
			continue
		}
		s.Interfaces[name] = append(s.Interfaces[name], netip.PrefixFrom(ip, int(m.Data[1])))
	}
	routes, err := dump(unix.RTM_GETROUTE, unix.RTM_NEWROUTE, unix.SizeofRtMsg)
	if err != nil {
		return State{}, err
	}
	for _, m := range routes {
		// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
		// scope, type (u8 each), flags u32.
		a := attrs(m)
		family, table := m.Data[0], u32(a[unix.RTA_TABLE], uint32(m.Data[4]))
		dst, _ := netip.AddrFromSlice(a[unix.RTA_DST])
		if (family != unix.AF_INET && family != unix.AF_INET6) || !wayOut(m.Data[1], dst) || table == unix.RT_TABLE_LOCAL ||
			m.Data[7] != unix.RTN_UNICAST || binary.NativeEndian.Uint32(m.Data[8:])&unix.RTM_F_CLONED != 0 {
			continue
		}
		r := Route{IPv6: family == unix.AF_INET6, Metric: u32(a[unix.RTA_PRIORITY], 0)}
		// A route out of an interface that is down leads nowhere; the
		// kernel keeps the IPv6 ones.
		add := func(oif uint32, gw []byte) {
			if name, ok := up[oif]; ok {
				r.Interface = name
				r.Gateway, _ = netip.AddrFromSlice(gw)
				s.DefaultRoutes = append(s.DefaultRoutes, r)
			}
		}
		mp := a[unix.RTA_MULTIPATH]
		if mp == nil {
			add(u32(a[unix.RTA_OIF], 0), a[unix.RTA_GATEWAY])
		}
		// An ECMP route lists its next hops, each a struct rtnexthop
		// (len u16, flags u8, hops u8, ifindex i32) and its attributes:
		// the 8 bytes of a struct ifaddrmsg before attributes, so the
		// address message's parser reads them.
		for len(mp) >= unix.SizeofRtNexthop {
			n := int(binary.NativeEndian.Uint16(mp))
			if n < unix.SizeofRtNexthop || n > len(mp) {
				break
			}
			add(binary.NativeEndian.Uint32(mp[4:]), attrs(syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWADDR}, Data: mp[:n]})[unix.RTA_GATEWAY])
			mp = mp[min((n+3)&^3, len(mp)):]
		}
	}
	s.normalize()
	return s, nil
}

// wayOut reports whether a route to dst/bits takes traffic to the world
// as a default route does: the default route itself, or a route to a
// large part of the address space (a sixteenth or more, multicast aside),
// which is how a VPN takes over without replacing the default route
// (OpenVPN's 0.0.0.0/1 and 128.0.0.0/1, its ::/3 and 2000::/4). Every
// routing table counts but the local one: wg-quick, NetworkManager's
// WireGuard and a Tailscale exit node put their default route in a table
// of their own, chosen by a routing rule.
func wayOut(bits uint8, dst netip.Addr) bool {
	return bits == 0 || bits <= 4 && !dst.IsMulticast()
}

// dump reads one netlink dump of typ and keeps its reply messages, those
// of type reply with at least the size of their fixed header.
func dump(typ int, reply uint16, size int) ([]syscall.NetlinkMessage, error) {
	b, err := syscall.NetlinkRIB(typ, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netwatch: netlink dump: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return nil, fmt.Errorf("netwatch: netlink dump: %w", err)
	}
	return slices.DeleteFunc(msgs, func(m syscall.NetlinkMessage) bool {
		return m.Header.Type != reply || len(m.Data) < size
	}), nil
}

// attrs maps the attributes of m by type; a malformed m has none.
func attrs(m syscall.NetlinkMessage) map[uint16][]byte {
	as, _ := syscall.ParseNetlinkRouteAttr(&m)
	byType := make(map[uint16][]byte, len(as))
	for _, a := range as {
		byType[a.Attr.Type&^unix.NLA_F_NESTED] = a.Value
	}
	return byType
}

// u32 is the 32-bit attribute value b, or def without one.
func u32(b []byte, def uint32) uint32 {
	if len(b) != 4 {
		return def
	}
	return binary.NativeEndian.Uint32(b)
}
