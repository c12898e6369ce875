package netwatch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// RouteSocket watches a BSD routing socket (macOS). Each message that may
// concern an interface, an address or a default route makes it read the
// State again; only a State that differs from the last one is a change.
type RouteSocket struct{}

// New returns the platform's source.
func New() Source { return RouteSocket{} }

// Run implements Source.
func (RouteSocket) Run(ctx context.Context, changed func(uplink bool)) error {
	fd, err := unix.Socket(unix.AF_ROUTE, unix.SOCK_RAW, unix.AF_UNSPEC)
	if err != nil {
		return fmt.Errorf("netwatch: routing socket: %w", err)
	}
	unix.CloseOnExec(fd)
	// Non-blocking, the descriptor sits in Go's netpoller (kqueue).
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("netwatch: routing socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "route")
	defer f.Close()
	return watchSocket(ctx, f, mayMatter, darwinState, func(was, is State) { changed(Uplink(was, is)) })
}

// mayMatter filters out the routing socket's chatter: ARP and neighbour
// entries, cloned host routes, lookups, misses.
func mayMatter(b []byte) bool {
	msgs, err := syscall.ParseRoutingMessage(b)
	if err != nil {
		return true
	}
	for _, m := range msgs {
		switch m := m.(type) {
		case *syscall.InterfaceMessage, *syscall.InterfaceAddrMessage:
			return true
		case *syscall.RouteMessage:
			switch int(m.Header.Type) {
			case unix.RTM_ADD, unix.RTM_DELETE, unix.RTM_CHANGE:
				if m.Header.Flags&(unix.RTF_LLINFO|unix.RTF_WASCLONED|unix.RTF_HOST) == 0 {
					return true
				}
			}
		}
	}
	return false
}

// darwinState is the interfaces' State with the default routes of the
// routing table.
func darwinState() (State, error) {
	s, err := interfaceState()
	if err != nil {
		return State{}, err
	}
	rib, err := syscall.RouteRIB(unix.NET_RT_DUMP, 0)
	if err != nil {
		return State{}, fmt.Errorf("netwatch: read routing table: %w", err)
	}
	msgs, err := syscall.ParseRoutingMessage(rib)
	if err != nil {
		return State{}, fmt.Errorf("netwatch: read routing table: %w", err)
	}
	for _, m := range msgs {
		rm, ok := m.(*syscall.RouteMessage)
		if !ok {
			continue
		}
		// macOS keeps a scoped default route per interface beside the
		// one default route it uses; only that one is the default.
		h := rm.Header
		if h.Flags&unix.RTF_UP == 0 || h.Flags&(unix.RTF_IFSCOPE|unix.RTF_HOST|unix.RTF_WASCLONED) != 0 {
			continue
		}
		sas, err := syscall.ParseRoutingSockaddr(rm)
		if err != nil || len(sas) <= unix.RTAX_GATEWAY {
			continue
		}
		r, ok := defaultRoute(sas[unix.RTAX_DST], sas[unix.RTAX_GATEWAY])
		if !ok {
			continue
		}
		r.Interface = fmt.Sprintf("#%d", h.Index)
		if ifc, err := net.InterfaceByIndex(int(h.Index)); err == nil {
			r.Interface = ifc.Name
		}
		s.DefaultRoutes = append(s.DefaultRoutes, r)
	}
	s.normalize()
	return s, nil
}

// defaultRoute reports whether dst is a default destination, and where
// the route goes.
func defaultRoute(dst, gw syscall.Sockaddr) (Route, bool) {
	var r Route
	switch d := dst.(type) {
	case *syscall.SockaddrInet4:
		if netip.AddrFrom4(d.Addr) != netip.IPv4Unspecified() {
			return r, false
		}
	case *syscall.SockaddrInet6:
		if netip.AddrFrom16(d.Addr) != netip.IPv6Unspecified() {
			return r, false
		}
		r.IPv6 = true
	default:
		return r, false
	}
	switch g := gw.(type) {
	case *syscall.SockaddrInet4:
		r.Gateway = netip.AddrFrom4(g.Addr)
	case *syscall.SockaddrInet6:
		r.Gateway = netip.AddrFrom16(g.Addr)
	}
	// A link-layer gateway (a tunnel's "link#12") leaves Gateway zero.
	return r, true
}
