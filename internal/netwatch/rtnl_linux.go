package netwatch

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// tracker keeps the State of the network from rtnetlink messages: a dump
// fills it, and every message the kernel multicasts afterwards updates it.
// Applying a message twice does what applying it once does, so a dump may
// overlap with the messages around it and the picture still converges.
//
// It is a pure function of the messages it is given, so the decision "was
// that a change" can be tested with recorded message sequences.
type tracker struct {
	links  map[int32]linkInfo
	addrs  map[addrKey]struct{}
	routes map[routeKey]struct{}
}

type linkInfo struct {
	name           string
	up, isLoopback bool
}

type addrKey struct {
	index  int32
	prefix netip.Prefix
}

type routeKey struct {
	ipv6   bool
	index  int32
	gw     netip.Addr
	metric uint32
}

func newTracker() *tracker {
	return &tracker{links: map[int32]linkInfo{}, addrs: map[addrKey]struct{}{}, routes: map[routeKey]struct{}{}}
}

// apply folds one rtnetlink message into t. Messages that are short or
// about something State leaves out are ignored.
func (t *tracker) apply(m syscall.NetlinkMessage) {
	if len(m.Data) < headerLen[m.Header.Type] {
		return
	}
	switch m.Header.Type {
	case unix.RTM_NEWLINK, unix.RTM_DELLINK:
		t.link(m)
	case unix.RTM_NEWADDR, unix.RTM_DELADDR:
		t.addr(m)
	case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
		t.route(m)
	}
}

// headerLen is the fixed header before the attributes of each message
// type the tracker reads.
var headerLen = map[uint16]int{
	unix.RTM_NEWLINK: unix.SizeofIfInfomsg, unix.RTM_DELLINK: unix.SizeofIfInfomsg,
	unix.RTM_NEWADDR: unix.SizeofIfAddrmsg, unix.RTM_DELADDR: unix.SizeofIfAddrmsg,
	unix.RTM_NEWROUTE: unix.SizeofRtMsg, unix.RTM_DELROUTE: unix.SizeofRtMsg,
}

func (t *tracker) link(m syscall.NetlinkMessage) {
	// struct ifinfomsg: family, pad, type u16, index i32, flags u32, change u32.
	index := int32(binary.NativeEndian.Uint32(m.Data[4:]))
	flags := binary.NativeEndian.Uint32(m.Data[8:])
	if m.Header.Type == unix.RTM_DELLINK {
		delete(t.links, index)
		maps.DeleteFunc(t.addrs, func(k addrKey, _ struct{}) bool { return k.index == index })
		t.dropRoutes(index)
		return
	}
	l := t.links[index]
	if name := attr(m, unix.IFLA_IFNAME); len(name) > 0 {
		l.name, _, _ = strings.Cut(string(name), "\x00")
	}
	l.up = flags&unix.IFF_UP != 0
	l.isLoopback = flags&unix.IFF_LOOPBACK != 0
	if !l.up {
		// A link going down takes its routes with it, and the kernel
		// does not say so for IPv4 ones.
		t.dropRoutes(index)
	}
	t.links[index] = l
}

func (t *tracker) addr(m syscall.NetlinkMessage) {
	// struct ifaddrmsg: family, prefixlen, flags, scope u8, index u32.
	bits := int(m.Data[1])
	flags := attr32(m, unix.IFA_FLAGS, uint32(m.Data[2]))
	index := int32(binary.NativeEndian.Uint32(m.Data[4:]))
	// IFA_LOCAL is the machine's own address; IFA_ADDRESS is the peer's
	// on a point-to-point link, and the only one given for IPv6.
	raw := attr(m, unix.IFA_LOCAL)
	if raw == nil {
		raw = attr(m, unix.IFA_ADDRESS)
	}
	ip, ok := netip.AddrFromSlice(raw)
	if !ok || bits > ip.BitLen() {
		return
	}
	k := addrKey{index, netip.PrefixFrom(ip, bits)}
	// A temporary (privacy) IPv6 address is replaced every day on a
	// laptop; its prefix is carried by the stable address beside it. An
	// address that failed duplicate detection is not usable.
	if m.Header.Type == unix.RTM_DELADDR || flags&(unix.IFA_F_TEMPORARY|unix.IFA_F_DADFAILED) != 0 || !counts(ip) {
		delete(t.addrs, k)
		return
	}
	t.addrs[k] = struct{}{}
}

func (t *tracker) route(m syscall.NetlinkMessage) {
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
	// scope, type (u8 each), flags u32.
	family, dstLen, typ := m.Data[0], m.Data[1], m.Data[7]
	rtFlags := binary.NativeEndian.Uint32(m.Data[8:])
	table := attr32(m, unix.RTA_TABLE, uint32(m.Data[4]))
	if (family != unix.AF_INET && family != unix.AF_INET6) || dstLen != 0 ||
		table != unix.RT_TABLE_MAIN || typ != unix.RTN_UNICAST || rtFlags&unix.RTM_F_CLONED != 0 {
		return
	}
	ipv6 := family == unix.AF_INET6
	metric := attr32(m, unix.RTA_PRIORITY, 0)
	var keys []routeKey
	if mp := attr(m, unix.RTA_MULTIPATH); mp != nil {
		for len(mp) >= unix.SizeofRtNexthop {
			// struct rtnexthop: len u16, flags u8, hops u8, ifindex i32, then attributes.
			n := int(binary.NativeEndian.Uint16(mp))
			if n < unix.SizeofRtNexthop || n > len(mp) {
				break
			}
			idx := int32(binary.NativeEndian.Uint32(mp[4:]))
			gw, _ := netip.AddrFromSlice(findAttr(mp[unix.SizeofRtNexthop:n], unix.RTA_GATEWAY))
			keys = append(keys, routeKey{ipv6, idx, gw, metric})
			mp = mp[min(align4(n), len(mp)):]
		}
	} else {
		idx := int32(attr32(m, unix.RTA_OIF, 0))
		gw, _ := netip.AddrFromSlice(attr(m, unix.RTA_GATEWAY))
		keys = append(keys, routeKey{ipv6, idx, gw, metric})
	}
	if m.Header.Type == unix.RTM_DELROUTE {
		for _, k := range keys {
			delete(t.routes, k)
		}
		return
	}
	if m.Header.Flags&unix.NLM_F_REPLACE != 0 {
		// "ip route replace default via X" sends only the new route:
		// the one it replaced (same family, table and metric) is gone.
		maps.DeleteFunc(t.routes, func(k routeKey, _ struct{}) bool { return k.ipv6 == ipv6 && k.metric == metric })
	}
	for _, k := range keys {
		t.routes[k] = struct{}{}
	}
}

func (t *tracker) dropRoutes(index int32) {
	maps.DeleteFunc(t.routes, func(k routeKey, _ struct{}) bool { return k.index == index })
}

// state is the State t holds now.
func (t *tracker) state() State {
	s := State{Interfaces: map[string][]netip.Prefix{}}
	for k := range t.addrs {
		l, ok := t.links[k.index]
		if !ok || !l.up || l.isLoopback {
			continue
		}
		s.Interfaces[l.name] = append(s.Interfaces[l.name], k.prefix)
	}
	for k := range t.routes {
		name := fmt.Sprintf("#%d", k.index)
		if l, ok := t.links[k.index]; ok {
			name = l.name
		}
		s.DefaultRoutes = append(s.DefaultRoutes, Route{IPv6: k.ipv6, Interface: name, Gateway: k.gw, Metric: k.metric})
	}
	s.normalize()
	return s
}

// attr returns the value of m's attribute typ, or nil.
func attr(m syscall.NetlinkMessage, typ uint16) []byte {
	hdr := headerLen[m.Header.Type]
	if len(m.Data) < align4(hdr) {
		return nil
	}
	return findAttr(m.Data[align4(hdr):], typ)
}

// attr32 is m's 32-bit attribute typ, or def when m has none.
func attr32(m syscall.NetlinkMessage, typ uint16, def uint32) uint32 {
	if a := attr(m, typ); len(a) == 4 {
		return binary.NativeEndian.Uint32(a)
	}
	return def
}

// findAttr walks a run of struct rtattr (len u16, type u16, value).
func findAttr(b []byte, typ uint16) []byte {
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.SizeofRtAttr || n > len(b) {
			return nil
		}
		if binary.NativeEndian.Uint16(b[2:])&^unix.NLA_F_NESTED == typ {
			return b[unix.SizeofRtAttr:n]
		}
		b = b[min(align4(n), len(b)):]
	}
	return nil
}

func align4(n int) int { return (n + 3) &^ 3 }
